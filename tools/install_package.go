package tools

import (
	"context"

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

func (h *handlers) installPackages(ctx context.Context, req *mcp.CallToolRequest, in InstallDependenciesInput) (*mcp.CallToolResult, InstallDependenciesOutput, error) {
	return h.installDependencies(ctx, req, in)
}
