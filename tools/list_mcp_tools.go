package tools

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pybox-dev/pybox/sandbox"
)

// CodeMode gives sandboxed programs the tools of downstream MCP servers
// (pybox_tools in the sandbox), over the runner's own channel: the
// sandbox keeps network none.
type CodeMode interface {
	// ForRun returns the tool calls of one run and how many it made.
	ForRun() (sandbox.ToolCalls, func() int)
	// Stubs describes the tools code may call as Python stubs, and names them.
	Stubs(ctx context.Context) (string, []string, error)
}

var listMCPToolsTool = &mcp.Tool{
	Name: "list_mcp_tools",
	Description: "List the tools of the downstream MCP servers that code can call, as Python stubs with typed parameters and docstrings. " +
		"In execute_code: from pybox_tools import tools, call_mcp_tool; tools.SERVER.TOOL(param=...) or call_mcp_tool(\"SERVER.TOOL\", param=...) " +
		"returns the tool's result as a Python value (structured content when it has some, else its text) and raises pybox_tools.MCPToolError on failure. " +
		"One program can call many tools without a round trip through the model.",
	Annotations: &mcp.ToolAnnotations{Title: "List the downstream MCP tools code can call", ReadOnlyHint: true},
}

// ListMCPToolsInput has no arguments.
type ListMCPToolsInput struct{}

// ListMCPToolsOutput is list_mcp_tools' structured result.
type ListMCPToolsOutput struct {
	Tools []string `json:"tools" jsonschema:"qualified names (SERVER.TOOL) code may call"`
	Stubs string   `json:"stubs" jsonschema:"Python stubs of those tools"`
}

func (h *handlers) listMCPTools(ctx context.Context, _ *mcp.CallToolRequest, _ ListMCPToolsInput) (*mcp.CallToolResult, ListMCPToolsOutput, error) {
	stubs, names, err := h.cfg.CodeMode.Stubs(ctx)
	if names == nil {
		names = []string{}
	}
	text := stubs
	if err != nil {
		text += fmt.Sprintf("\n# Some servers could not be reached: %v\n", err)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, ListMCPToolsOutput{Tools: names, Stubs: stubs}, nil
}
