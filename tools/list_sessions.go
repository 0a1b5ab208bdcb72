package tools

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

var listSessionsTool = &mcp.Tool{
	Name: "list_sessions",
	Description: "List the live stateful sessions: id, age, idle time and the environment (image) each one uses. " +
		"A session keeps the environment that was active when it started; sessions end after an idle timeout.",
	Annotations: &mcp.ToolAnnotations{Title: "List sessions", ReadOnlyHint: true},
}

// SessionView describes one live session.
type SessionView struct {
	SessionID string   `json:"session_id"`
	AgeS      float64  `json:"age_s" jsonschema:"seconds since the session started"`
	IdleS     float64  `json:"idle_s" jsonschema:"seconds since its last program"`
	Busy      bool     `json:"busy" jsonschema:"a program is running in it now"`
	Image     string   `json:"image" jsonschema:"environment image the session uses (the one active when it started)"`
	Python    []string `json:"python" jsonschema:"command that starts its Python"`
}

// ListSessionsOutput lists the sessions.
type ListSessionsOutput struct {
	Sessions    []SessionView `json:"sessions"`
	IdleTimeout float64       `json:"idle_timeout_s" jsonschema:"a session idle this long ends"`
	MaxSessions int           `json:"max_sessions" jsonschema:"live sessions allowed at once"`
}

func (h *handlers) listSessions(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, ListSessionsOutput, error) {
	now := time.Now()
	out := ListSessionsOutput{Sessions: []SessionView{}, IdleTimeout: h.cfg.Sandbox.SessionTTL().Seconds(), MaxSessions: h.cfg.Sandbox.MaxSessions()}
	var b strings.Builder
	for _, s := range h.cfg.Sandbox.Sessions() {
		v := SessionView{SessionID: s.ID, AgeS: round1(now.Sub(s.Created)), IdleS: round1(now.Sub(s.LastUsed)),
			Busy: s.Busy, Image: s.Image, Python: s.Python}
		out.Sessions = append(out.Sessions, v)
		fmt.Fprintf(&b, "%s: age %.0fs, idle %.0fs, busy %v, environment %s\n", v.SessionID, v.AgeS, v.IdleS, v.Busy, v.Image)
	}
	if len(out.Sessions) == 0 {
		b.WriteString("No live sessions.\n")
	}
	return textResult(b.String()), out, nil
}

func round1(d time.Duration) float64 { return float64(d.Milliseconds()/100) / 10 }
