package sandbox_test

import (
	"testing"

	"github.com/pybox-dev/pybox/sandbox"
)

// TestReapSparesLiveOwnerWithSamePID: two live servers whose pids coincide
// (each is pid 1 of its own PID namespace, or both run in this process)
// and whose hostnames match: one reaping never removes the other's
// containers. The other's session survives with its state.
func TestReapSparesLiveOwnerWithSamePID(t *testing.T) {
	other, eng := newSandbox(t, sandbox.Config{WarmPool: -1})
	if res := run(t, other, "live", "x = 7"); res.ExitCode != 0 {
		t.Fatalf("session start: exit %d stderr %q", res.ExitCode, res.Stderr)
	}
	before := owned(t, eng, other)
	reaper, _ := newSandbox(t, sandbox.Config{WarmPool: -1})
	n, err := reaper.ReapOrphans(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if left := owned(t, eng, other); len(left) != len(before) || n != 0 {
		t.Errorf("reaped %d; the live owner's containers went from %d to %d", n, len(before), len(left))
	}
	if res := run(t, other, "live", "print(x)"); res.Stdout != "7\n" || res.SessionLost || res.NewSession {
		t.Errorf("live session after the reap: stdout %q lost=%v new=%v; want 7 in the same session", res.Stdout, res.SessionLost, res.NewSession)
	}
}
