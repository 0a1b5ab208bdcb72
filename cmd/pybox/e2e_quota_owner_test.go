//go:build !windows

package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pybox-dev/pybox/tools"
)

// writeOutputs writes 20 MiB into the run's own output folder, then stays
// a few seconds so that the runs overlap.
const writeOutputs = `import os, time
with open(os.path.join(os.environ["PYBOX_OUTPUTS"], "part.bin"), "wb") as f:
    f.write(b"x" * (20 << 20))
time.sleep(4)
print("kept it")
`

// Concurrent runs share their owner's quota: each one's output folder is
// counted with the others', so four runs of 20 MiB cannot all pass a
// 32 MiB quota (the old server counted each run's own folder only, so
// storage could reach max-concurrency times the quota).
func TestQuotaBoundsConcurrentRunsTogether(t *testing.T) {
	parallelTest(t)
	s := startServer(t, "PYBOX_WORKSPACE_QUOTA=32m", "PYBOX_MAX_CONCURRENT=4")
	const runs = 4
	outs := make([]tools.ExecutionOutput, runs)
	errs := make([]error, runs)
	var wg sync.WaitGroup
	for i := range runs {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
			defer cancel()
			res, err := s.cs.CallTool(ctx, &mcp.CallToolParams{Name: "execute_code", Arguments: map[string]any{"code": writeOutputs}})
			if errs[i] = err; err == nil {
				outs[i] = decode[tools.ExecutionOutput](t, res)
			}
		})
	}
	wg.Wait()
	stopped := 0
	for i, out := range outs {
		if errs[i] != nil {
			t.Fatalf("run %d: %v", i, errs[i])
		}
		if out.QuotaExceeded {
			stopped++
		}
		t.Logf("run %d: exit %d, quota_exceeded=%v %s", i, out.ExitCode, out.QuotaExceeded, out.Stdout)
	}
	if stopped < runs-1 {
		t.Fatalf("%d of %d runs writing 20 MiB each at once were stopped for a 32 MiB quota; want at least %d", stopped, runs, runs-1)
	}
}

// fillSession writes 12 MiB into the session's folder.
const fillSession = "open('data.bin', 'wb').write(b'x' * (12 << 20))\nprint('filled')"

// Sessions count in their owner's storage together, and a closed
// session's folder is removed: one tenant can no longer fill the disk with
// sessions (the old server gave each session folder its own quota and kept
// it after close_session).
func TestQuotaCountsSessionsAndRemovesClosedOnes(t *testing.T) {
	parallelTest(t)
	s := startServer(t, "PYBOX_WORKSPACE_QUOTA=16m")
	out, res := s.exec(map[string]any{"code": fillSession, "session_id": "one"})
	if out.ExitCode != 0 || out.QuotaExceeded {
		t.Fatalf("the first session within the quota: %s", text(res))
	}
	out, res = s.exec(map[string]any{"code": fillSession + "\nimport time; time.sleep(2)", "session_id": "two"})
	if !out.QuotaExceeded {
		t.Fatalf("a second session took the owner to 24 MiB of a 16 MiB quota: %s", text(res))
	}
	for _, id := range []string{"one", "two"} {
		if res := s.call("close_session", map[string]any{"session_id": id}); res.IsError && !strings.Contains(text(res), "no such session") {
			t.Fatalf("close_session %s: %s", id, text(res))
		}
	}
	for _, id := range []string{"one", "two"} {
		if _, err := os.Stat(filepath.Join(s.state, "sessions", id)); !os.IsNotExist(err) {
			t.Fatalf("session %s's folder is still there after close_session (err %v)", id, err)
		}
	}
	out, res = s.exec(map[string]any{"code": fillSession, "session_id": "three"})
	if out.ExitCode != 0 || out.QuotaExceeded {
		t.Fatalf("a new session once the closed ones were removed: %s", text(res))
	}
}
