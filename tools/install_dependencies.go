package tools

import (
	"context"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

var installDependenciesTool = &mcp.Tool{
	Name: "install_dependencies",
	Description: "Install Python packages into the active environment so later runs can import them. " +
		"Each entry is a PEP 508 requirement such as \"requests\" or \"numpy>=1.26,<2\" (no pip options or paths; " +
		"URLs only when the server allows them). " +
		"Installs run in their own container and are cached as image layers: asking again for the same packages answers at once (\"cached\").",
	Annotations: &mcp.ToolAnnotations{Title: "Install Python packages", IdempotentHint: true},
}

// InstallDependenciesInput are install_dependencies' arguments.
type InstallDependenciesInput struct {
	Packages []string `json:"packages" jsonschema:"PEP 508 requirements, e.g. [\"requests\", \"pandas==2.2.2\"]"`
}

// InstallDependenciesOutput reports an install.
type InstallDependenciesOutput struct {
	Requested    []string `json:"requested" jsonschema:"the requirements asked for, in canonical form"`
	Cached       bool     `json:"cached" jsonschema:"served from an existing layer: no installer ran"`
	Installer    string   `json:"installer,omitempty" jsonschema:"uv or pip"`
	Image        string   `json:"image" jsonschema:"image the environment now uses"`
	Requirements []string `json:"requirements" jsonschema:"every package installed in the environment so far"`
	DurationMS   int64    `json:"duration_ms"`
	Output       string   `json:"output,omitempty" jsonschema:"the installer's output (its tail)"`
}

func (h *handlers) installDependencies(ctx context.Context, req *mcp.CallToolRequest, in InstallDependenciesInput) (*mcp.CallToolResult, InstallDependenciesOutput, error) {
	requested, err := h.cfg.Envs.Canonical(in.Packages)
	if err != nil {
		return nil, InstallDependenciesOutput{}, err
	}
	if err := h.cfg.Ready(ctx); err != nil {
		return nil, InstallDependenciesOutput{}, h.readyError(ctx, err)
	}
	res, err := h.cfg.Envs.Install(ctx, in.Packages)
	if err != nil {
		if res.Output != "" {
			err = fmt.Errorf("%w:\n%s", err, res.Output)
		}
		return nil, InstallDependenciesOutput{}, h.envError(ctx, "install packages", err)
	}
	out := InstallDependenciesOutput{Requested: requested, Cached: res.Cached, Installer: res.Installer,
		Image: res.Env.Image, Requirements: res.Env.Requirements, DurationMS: res.Duration.Milliseconds(), Output: res.Output}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: installSummary(out)}}}, out, nil
}

func installSummary(o InstallDependenciesOutput) string {
	what := strings.Join(o.Requested, ", ")
	if o.Cached {
		return fmt.Sprintf("%s: already available (cached); nothing was installed. Environment image: %s.", what, o.Image)
	}
	return fmt.Sprintf("Installed %s with %s in %.1fs. Environment image: %s (%s in total).",
		what, o.Installer, float64(o.DurationMS)/1000, o.Image, plural(len(o.Requirements), "requirement"))
}
