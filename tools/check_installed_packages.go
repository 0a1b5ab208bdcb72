package tools

import (
	"context"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pybox-dev/pybox/images"
)

var checkInstalledPackagesTool = &mcp.Tool{
	Name: "check_installed_packages",
	Description: "Tell, for each name, whether it is installed in the active environment and which version. " +
		"A name may be a distribution (pip's name: scikit-learn, Pillow) or an import name (sklearn, PIL, json); " +
		"the answer says which matched.",
	Annotations: &mcp.ToolAnnotations{Title: "Check installed packages", ReadOnlyHint: true},
}

// CheckInstalledPackagesInput are check_installed_packages' arguments.
type CheckInstalledPackagesInput struct {
	Packages []string `json:"packages" jsonschema:"distribution or import names, e.g. [\"numpy\", \"PIL\", \"json\"]"`
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
			fmt.Fprintf(&b, "%s: installed (version %s; %s)\n", p.Name, p.Version, p.Matched)
		} else {
			fmt.Fprintf(&b, "%s: not installed\n", p.Name)
		}
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: b.String()}}}, CheckInstalledPackagesOutput{Packages: st}, nil
}
