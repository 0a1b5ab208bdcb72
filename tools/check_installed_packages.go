package tools

import (
	"context"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pybox-dev/pybox/images"
)

var checkInstalledPackagesTool = &mcp.Tool{
	Name:        "check_installed_packages",
	Description: "Tell, for each package name, whether it is installed in the active environment and which version.",
	Annotations: &mcp.ToolAnnotations{Title: "Check installed packages", ReadOnlyHint: true},
}

// CheckInstalledPackagesInput are check_installed_packages' arguments.
type CheckInstalledPackagesInput struct {
	Packages []string `json:"packages" jsonschema:"package names, e.g. [\"numpy\", \"requests\"]"`
}

// CheckInstalledPackagesOutput lists the answers.
type CheckInstalledPackagesOutput struct {
	Packages []images.PackageStatus `json:"packages"`
}

func (h *handlers) checkInstalledPackages(ctx context.Context, req *mcp.CallToolRequest, in CheckInstalledPackagesInput) (*mcp.CallToolResult, CheckInstalledPackagesOutput, error) {
	if _, err := images.PackageKeys(in.Packages); err != nil {
		return nil, CheckInstalledPackagesOutput{}, err
	}
	if err := h.cfg.Ready(ctx); err != nil {
		return nil, CheckInstalledPackagesOutput{}, h.readyError(ctx, err)
	}
	st, err := h.cfg.Envs.Installed(ctx, in.Packages)
	if err != nil {
		return nil, CheckInstalledPackagesOutput{}, h.envError(ctx, "check installed packages", err)
	}
	var b strings.Builder
	for _, p := range st {
		if p.Installed {
			fmt.Fprintf(&b, "%s: installed (version %s)\n", p.Name, p.Version)
		} else {
			fmt.Fprintf(&b, "%s: not installed\n", p.Name)
		}
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: b.String()}}}, CheckInstalledPackagesOutput{Packages: st}, nil
}
