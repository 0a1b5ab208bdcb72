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
	Description: "End a stateful session: its container is removed, its variables are gone and its own folder (its /workspace) is deleted. Files it wrote into code storage stay.",
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
	if errors.Is(err, sandbox.ErrNoSession) && h.removeEndedFolder(in.SessionID) {
		return textResult(fmt.Sprintf("Session %s had already ended; its folder was deleted.", in.SessionID)), CloseSessionOutput{SessionID: in.SessionID, Closed: true}, nil
	}
	switch {
	case errors.Is(err, sandbox.ErrNoSession), errors.Is(err, sandbox.ErrBadSessionID):
		return nil, CloseSessionOutput{}, err
	case err != nil:
		return nil, CloseSessionOutput{}, h.internal(ctx, "close the session", err)
	}
	return textResult(fmt.Sprintf("Session %s closed.", in.SessionID)), CloseSessionOutput{SessionID: in.SessionID, Closed: true}, nil
}

// removeEndedFolder deletes the folder a session that is no longer live
// left (it ended for a timeout, the quota, a crash or a restart); it
// reports whether there was one. It runs while no session of the id is
// live or starting, and none can start (a call for it waits).
func (h *handlers) removeEndedFolder(id string) bool {
	if h.cfg.Sessions == nil || sandbox.ValidSessionID(id) != nil {
		return false
	}
	removed := false
	h.cfg.Sandbox.WhileEnded(id, func() {
		if _, err := h.cfg.Sessions.Stat(id); err != nil {
			return
		}
		if err := h.cfg.Sessions.RemoveAll(id); err != nil {
			h.cfg.Log.Warn("ended session's folder not removed", "session_id", id, "err", err)
			return
		}
		removed = true
	})
	return removed
}
