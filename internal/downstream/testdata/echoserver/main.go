// Command echoserver is a small MCP server over stdio for downstream
// tests: echo, add, crash (the process exits) and hang (never answers).
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type echoIn struct {
	Text  string `json:"text" jsonschema:"what to echo"`
	Times int    `json:"times,omitempty" jsonschema:"how many times"`
}

type addIn struct {
	A float64 `json:"a"`
	B float64 `json:"b"`
}

type none struct{}

func main() {
	s := mcp.NewServer(&mcp.Implementation{Name: "echoserver", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echo text back."}, func(ctx context.Context, r *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, map[string]any, error) {
		n := max(in.Times, 1)
		out := ""
		for range n {
			out += in.Text
		}
		return nil, map[string]any{"echo": out, "pid": os.Getpid()}, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "add", Description: "Add two numbers."}, func(ctx context.Context, r *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, map[string]any, error) {
		return nil, map[string]any{"sum": in.A + in.B}, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "Fail with a message."}, func(ctx context.Context, r *mcp.CallToolRequest, in none) (*mcp.CallToolResult, any, error) {
		return nil, nil, fmt.Errorf("it failed on purpose")
	})
	mcp.AddTool(s, &mcp.Tool{Name: "crash", Description: "Exit the process."}, func(ctx context.Context, r *mcp.CallToolRequest, in none) (*mcp.CallToolResult, any, error) {
		fmt.Fprintln(os.Stderr, "echoserver: crashing on purpose")
		os.Exit(3)
		return nil, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "hang", Description: "Never answer."}, func(ctx context.Context, r *mcp.CallToolRequest, in none) (*mcp.CallToolResult, any, error) {
		select {
		case <-ctx.Done():
		case <-time.After(time.Hour):
		}
		return nil, nil, ctx.Err()
	})
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
