package tools

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pybox-dev/pybox/images"
)

var configureEnvironmentTool = &mcp.Tool{
	Name: "configure_environment",
	Description: "Switch the Python environment programs run in. type: venv-uv (default: the runtime image's venv, " +
		"optional venv_path (or uv_venv_path) and variant), venv (venv_path inside the image), conda (conda_name, in an image that has conda), " +
		"or image (an allowed local image, by full reference such as name:tag, never an image ID, with python_path). The choice is checked (image allowed and present, Python starts) before it " +
		"takes effect, and it survives a server restart. A wrong combination is an error and changes nothing.",
	Annotations: &mcp.ToolAnnotations{Title: "Configure the environment", IdempotentHint: true},
}

// ConfigureEnvironmentInput are configure_environment's arguments.
type ConfigureEnvironmentInput struct {
	Type       string `json:"type" jsonschema:"venv-uv, venv, conda or image"`
	VenvPath   string `json:"venv_path,omitempty" jsonschema:"venv inside the image (venv-uv, venv; default /opt/venv)"`
	UVVenvPath string `json:"uv_venv_path,omitempty" jsonschema:"mcp_code_executor's name for venv_path with type venv-uv (a venv inside the image)"`
	CondaName  string `json:"conda_name,omitempty" jsonschema:"conda environment name (conda)"`
	Image      string `json:"image,omitempty" jsonschema:"allowed local image by full reference, e.g. name:tag (image, conda; optional for venv types)"`
	PythonPath string `json:"python_path,omitempty" jsonschema:"interpreter inside the image (image; default python3)"`
	Variant    string `json:"variant,omitempty" jsonschema:"runtime image variant for venv types: base or datascience (numpy, pandas, matplotlib)"`
}

func (h *handlers) configureEnvironment(ctx context.Context, req *mcp.CallToolRequest, in ConfigureEnvironmentInput) (*mcp.CallToolResult, EnvironmentView, error) {
	switch {
	case in.UVVenvPath != "" && in.VenvPath != "" && in.UVVenvPath != in.VenvPath:
		return nil, EnvironmentView{}, fmt.Errorf("venv_path %q and uv_venv_path %q disagree: give one", in.VenvPath, in.UVVenvPath)
	case in.UVVenvPath != "" && in.Type != images.EnvVenvUV:
		return nil, EnvironmentView{}, fmt.Errorf("uv_venv_path is for type %s; for type %q use venv_path", images.EnvVenvUV, in.Type)
	case in.UVVenvPath != "":
		in.VenvPath = in.UVVenvPath
	}
	want := images.Environment{Type: in.Type, VenvPath: in.VenvPath, CondaName: in.CondaName,
		BaseImage: in.Image, PythonPath: in.PythonPath, Variant: in.Variant}
	if _, err := want.Normalize(); err != nil {
		return nil, EnvironmentView{}, err
	}
	if err := h.cfg.Ready(ctx); err != nil {
		return nil, EnvironmentView{}, h.readyError(ctx, err)
	}
	env, err := h.cfg.Envs.Configure(ctx, want)
	if err != nil {
		return nil, EnvironmentView{}, h.envError(ctx, "configure the environment", err)
	}
	v := h.view(env)
	text := fmt.Sprintf("Environment is now %s in %s (Python: %v).", v.Type, v.Image, v.Python)
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, v, nil
}
