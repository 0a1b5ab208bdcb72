package tools

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

var getEnvironmentConfigTool = &mcp.Tool{
	Name: "get_environment_config",
	Description: "Show the active environment: type, image tag and ID, how Python starts, the packages installed so far, " +
		"the package index settings and the limits every run gets.",
	Annotations: &mcp.ToolAnnotations{Title: "Show the environment", ReadOnlyHint: true},
}

func (h *handlers) getEnvironmentConfig(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, EnvironmentView, error) {
	if err := h.cfg.Ready(ctx); err != nil {
		return nil, EnvironmentView{}, h.readyError(ctx, err)
	}
	v := h.view(h.cfg.Envs.Active())
	v.Limits = h.limitsView()
	b, _ := json.MarshalIndent(v, "", "  ") // a struct of plain fields always marshals
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, v, nil
}
