package tools

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

var healthCheckTool = &mcp.Tool{
	Name: "health_check",
	Description: "Report the server's health: whether the sandbox is ready (Docker reachable, runtime image present), " +
		"the Python environment programs run in, the limits every run gets, and the live sessions.",
	Annotations: &mcp.ToolAnnotations{Title: "Health check", ReadOnlyHint: true},
}

// HealthOutput is health_check's result.
type HealthOutput struct {
	Status      string          `json:"status" jsonschema:"ok, or not ready"`
	Problem     string          `json:"problem,omitempty" jsonschema:"why the sandbox is not ready"`
	Version     string          `json:"version" jsonschema:"pybox version"`
	Environment EnvironmentView `json:"environment" jsonschema:"the environment programs run in"`
	Sessions    int             `json:"sessions" jsonschema:"live sessions"`
}

// healthCheck is mcp-python-executor's health_check.
func (h *handlers) healthCheck(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, HealthOutput, error) {
	out := HealthOutput{Status: "ok", Version: h.cfg.Version, Sessions: len(h.cfg.Sandbox.Sessions())}
	if err := h.cfg.Ready(ctx); err != nil {
		out.Status, out.Problem = "not ready", h.readyError(ctx, err).Error()
	}
	out.Environment = h.view(h.cfg.Envs.Active())
	out.Environment.Limits = h.limitsView()
	b, _ := json.MarshalIndent(out, "", "  ") // plain fields always marshal
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}, IsError: out.Status != "ok"}, out, nil
}
