package tools

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// install_package (mcp-executor) and install_packages (mcp-python-executor)
// are install_dependencies under those servers' names and arguments.

var installPackageTool = &mcp.Tool{
	Name: "install_package",
	Description: "Install one Python package (a PEP 508 requirement such as \"requests\" or \"numpy==1.26.4\") " +
		"into the sandbox environment; later runs can import it. Installs are cached.",
	Annotations: &mcp.ToolAnnotations{Title: "Install a package", IdempotentHint: true},
}

// InstallPackageInput is install_package's argument.
type InstallPackageInput struct {
	Package string `json:"package" jsonschema:"the requirement, e.g. \"pandas>=2\""`
}

func (h *handlers) installPackage(ctx context.Context, req *mcp.CallToolRequest, in InstallPackageInput) (*mcp.CallToolResult, InstallDependenciesOutput, error) {
	return h.installDependencies(ctx, req, InstallDependenciesInput{Packages: []string{in.Package}})
}

var installPackagesTool = &mcp.Tool{
	Name: "install_packages",
	Description: "Install Python packages (PEP 508 requirements) into the sandbox environment; later runs can " +
		"import them. Installs are cached.",
	Annotations: &mcp.ToolAnnotations{Title: "Install packages", IdempotentHint: true},
}

// InstallPackagesInput is mcp-python-executor's install_packages: a list,
// or a comma-separated string ("numpy>=1.20.0, pandas").
type InstallPackagesInput struct {
	Packages packageList `json:"packages" jsonschema:"requirements: a list, or one comma-separated string"`
}

func (h *handlers) installPackages(ctx context.Context, req *mcp.CallToolRequest, in InstallPackagesInput) (*mcp.CallToolResult, InstallDependenciesOutput, error) {
	return h.installDependencies(ctx, req, InstallDependenciesInput{Packages: in.Packages})
}

// packageList takes a JSON list of strings or one string of
// comma-separated requirements (a string that is itself a JSON list, as
// clients that cannot send lists pass one, counts as that list).
type packageList []string

func (l *packageList) UnmarshalJSON(data []byte) error {
	var list []string
	if err := json.Unmarshal(data, &list); err == nil {
		*l = list
		return nil
	}
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return errors.New("packages must be a list of requirements or a comma-separated string")
	}
	if strings.HasPrefix(strings.TrimSpace(s), "[") && json.Unmarshal([]byte(s), &list) == nil {
		*l = list
		return nil
	}
	*l = nil
	for p := range strings.SplitSeq(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*l = append(*l, p)
		}
	}
	return nil
}

// packagesSchema: a list of strings, or one string (as the original).
func packagesSchema(s *jsonschema.Schema) {
	s.Properties["packages"] = &jsonschema.Schema{
		Description: "requirements: a list, or one comma-separated string (e.g. \"numpy>=1.20.0, pandas\")",
		OneOf: []*jsonschema.Schema{
			{Type: "array", Items: &jsonschema.Schema{Type: "string"}},
			{Type: "string"},
		},
	}
}
