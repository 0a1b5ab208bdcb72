package sandbox_test

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/pybox-dev/pybox/sandbox"
)

// TestFakeCloseRacingANewCall: close_session of a session while a new call
// with the same id arrives. The close removes the old container, then the
// session's folder; the new call must get a session whose folder is its
// own to the end: the file its call wrote is still there, and no
// container is left beyond the live sessions'. Before the fix the new
// session started while the old one was being removed, and the close then
// deleted the folder under it (the new call's file gone, its /workspace a
// deleted folder).
func TestFakeCloseRacingANewCall(t *testing.T) {
	f := newFake()
	sb := fakeSandbox(t, f, sandbox.Config{WarmPool: -1, MaxSessions: 4})
	defer sb.Close()
	ws := filepath.Join(t.TempDir(), "s")
	write := func(name string) func() error {
		return func() error { return os.WriteFile(filepath.Join(ws, name), []byte(name), 0o644) }
	}
	prog := func(name string) sandbox.SessionProgram {
		return sandbox.SessionProgram{Workspace: ws, Private: true, Code: "x", Prepare: write(name), MakeWorkspace: func() error {
			return os.Mkdir(ws, 0o755)
		}}
	}
	if res, err := sb.RunInSession(t.Context(), "s", prog("old.txt")); err != nil || res.Stdout != "ran: x\n" {
		t.Fatalf("first call: %+v, %v", res, err)
	}
	removing, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	f.onRemove = func(string) { // the old container's removal waits until the new call ran (or tried to)
		once.Do(func() { close(removing); <-release })
	}
	closed := make(chan error, 1)
	go func() { closed <- sb.CloseSession(t.Context(), "s") }()
	<-removing
	type result struct {
		res sandbox.Result
		err error
	}
	second := make(chan result, 1)
	go func() {
		res, err := sb.RunInSession(t.Context(), "s", prog("new.txt"))
		second <- result{res, err}
	}()
	var got result
	select {
	case got = <-second: // the new call did not wait for the close
		close(release)
	case <-time.After(2 * time.Second): // it waits for the close to end (as it should): let the close go on
		close(release)
		got = <-second
	}
	if err := <-closed; err != nil {
		t.Fatalf("close_session: %v", err)
	}
	if got.err != nil || got.res.Stdout != "ran: x\n" || !got.res.NewSession {
		t.Fatalf("the new call: %+v, %v; want a new session that ran", got.res, got.err)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "new.txt")); err != nil || string(b) != "new.txt" {
		t.Errorf("the new session's file: %q, %v; the close removed the folder under the new session", b, err)
	}
	if _, err := os.Stat(filepath.Join(ws, "old.txt")); err == nil {
		t.Errorf("the closed session's file is still there: its folder was not removed before the new session began")
	}
	if live, _ := f.counts(); live != len(sb.Sessions()) {
		t.Errorf("%d containers live for %d sessions", live, len(sb.Sessions()))
	}
}
