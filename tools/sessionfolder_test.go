package tools

import (
	"context"
	"os"
	"testing"

	"github.com/pybox-dev/pybox/sandbox"
)

// TestRefusedSessionLeavesNoFolder: a session start refused for the cap on
// sessions, or failing (its image does not exist), leaves no trace: no
// folder for the id in the sessions root (before the fix the tool made the
// folder before the start was admitted, and the refusal left it, empty).
func TestRefusedSessionLeavesNoFolder(t *testing.T) {
	ready := func(context.Context) error { return nil }
	h := runHandlersWith(t, sandbox.Config{MaxSessions: 1}, ready)
	if _, out, err := h.executeCode(t.Context(), nil, ExecuteCodeInput{Code: "print('a')", SessionID: "a"}); err != nil || out.Stdout != "a\n" {
		t.Fatalf("session a: %+v, %v", out, err)
	}
	if _, _, err := h.executeCode(t.Context(), nil, ExecuteCodeInput{Code: "print('b')", SessionID: "b"}); err == nil {
		t.Fatal("session b started past the cap of 1")
	}
	h.cfg.Envs = imageEnvs{fakeEnvs{t}, "pybox-test-no-such-image:none"}
	if _, _, err := h.executeCode(t.Context(), nil, ExecuteCodeInput{Code: "print('c')", SessionID: "c"}); err == nil {
		t.Fatal("session c started on an image that does not exist")
	}
	if _, _, err := h.closeSession(t.Context(), nil, CloseSessionInput{SessionID: "a"}); err != nil {
		t.Fatal(err)
	}
	left, err := os.ReadDir(h.cfg.Sessions.Path())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range left {
		t.Errorf("the sessions folder holds %s after the refusals", e.Name())
	}
}
