package tools

import (
	"context"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pybox-dev/pybox/sandbox"
)

var closeSessionTool = &mcp.Tool{
	Name:        "close_session",
	Description: "End a stateful session: its container is removed and its variables are gone. Its files stay in code storage.",
	Annotations: &mcp.ToolAnnotations{Title: "Close a session", DestructiveHint: new(true)},
}

// CloseSessionInput are close_session's arguments.
type CloseSessionInput struct {
	SessionID string `json:"session_id" jsonschema:"the session to end"`
}

// CloseSessionOutput confirms the close.
type CloseSessionOutput struct {
	SessionID string `json:"session_id"`
	Closed    bool   `json:"closed"`
}

func (h *handlers) closeSession(ctx context.Context, req *mcp.CallToolRequest, in CloseSessionInput) (*mcp.CallToolResult, CloseSessionOutput, error) {
	err := h.cfg.Sandbox.CloseSession(ctx, in.SessionID)
	switch {
	case errors.Is(err, sandbox.ErrNoSession), errors.Is(err, sandbox.ErrBadSessionID):
		return nil, CloseSessionOutput{}, err
	case err != nil:
		return nil, CloseSessionOutput{}, h.internal(ctx, "close the session", err)
	}
	return textResult(fmt.Sprintf("Session %s closed.", in.SessionID)), CloseSessionOutput{SessionID: in.SessionID, Closed: true}, nil
}
