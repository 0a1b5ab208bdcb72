package sandbox_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/pybox-dev/pybox/images"
	"github.com/pybox-dev/pybox/internal/engine"
	"github.com/pybox-dev/pybox/internal/testenv"
	"github.com/pybox-dev/pybox/sandbox"
)

// newSandbox returns a Sandbox on the real daemon with the base runtime
// image. At cleanup it closes the sandbox and checks that none of its
// containers is left.
func newSandbox(t *testing.T, cfg sandbox.Config) (*sandbox.Sandbox, *engine.Client) {
	t.Helper()
	eng := testenv.Docker(t)
	cfg.Engine = eng
	cfg.Image = testenv.RuntimeImage(t, eng, "base")
	if cfg.RunsDir == "" {
		cfg.RunsDir = t.TempDir()
	}
	sb, err := sandbox.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sb.Close()
		if left := owned(t, eng, sb); len(left) != 0 {
			t.Errorf("containers left after Close: %v", left)
			for _, c := range left {
				_ = eng.Remove(context.Background(), c.ID) // best effort; the failure is reported above
			}
		}
	})
	return sb, eng
}

// owned lists the containers of sb that exist now.
func owned(t *testing.T, eng *engine.Client, sb *sandbox.Sandbox) []engine.Summary {
	t.Helper()
	return testenv.Managed(t, eng, map[string]string{sandbox.LabelOwner: sb.Owner().ID})
}

// waitFor polls cond every 20ms until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// workspace writes code as main.py into a directory the sandbox user can read.
func workspace(t *testing.T, code string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.py"), []byte(code), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// slowPython is an interpreter argv whose start takes d: the session's
// container exists, but its kernel is not ready yet.
func slowPython(d time.Duration) []string {
	return []string{"/bin/sh", "-c", `sleep "$0"; exec "` + images.VenvPython + `" "$@"`,
		strconv.FormatFloat(d.Seconds(), 'f', -1, 64)}
}

// run is one session call.
func run(t *testing.T, sb *sandbox.Sandbox, id, code string) sandbox.Result {
	t.Helper()
	res, err := sb.RunInSession(t.Context(), id, sandbox.SessionProgram{Code: code, Filename: "/workspace/cell.py"})
	if err != nil {
		t.Fatalf("session %s: %v", id, err)
	}
	return res
}

func sessionIDs(sb *sandbox.Sandbox) []string {
	var ids []string
	for _, s := range sb.Sessions() {
		ids = append(ids, s.ID)
	}
	return ids
}
