//go:build linux

package sandbox_test

import (
	"strings"
	"testing"

	"github.com/pybox-dev/pybox/internal/testenv"
	"github.com/pybox-dev/pybox/sandbox"
)

// TestSessionStartsOnAFullRunsDir: a session started when its output
// area cannot be made (the runs folder's filesystem is full: here a tmpfs
// out of inodes, as a full quota filesystem is out of room) runs without
// one and each turn says why, where its start was an internal failure
// (CI met it on a quota filesystem a stateless run had filled).
func TestSessionStartsOnAFullRunsDir(t *testing.T) {
	runs := testenv.SmallFS(t)
	sb, _ := newSandbox(t, sandbox.Config{RunsDir: runs, WarmPool: -1, Limits: sandbox.Limits{DiskReserve: -1}}) // a 1 MiB disk: no reserve
	free := testenv.Fill(t, runs)
	res, err := sb.RunInSession(t.Context(), "full", sandbox.SessionProgram{Code: "print('runs')"})
	if err != nil || res.Stdout != "runs\n" || res.Outputs != nil || !strings.Contains(res.OutputsNote, "the storage quota was full when this session started") {
		t.Fatalf("a session on a full runs folder: err %v, exit %d, stdout %q, stderr %q, outputs %v, note %q; want it to run, without an output area, and say why",
			err, res.ExitCode, res.Stdout, res.Stderr, res.Outputs, res.OutputsNote)
	}
	free() // room again: the next session has its area
	res, err = sb.RunInSession(t.Context(), "roomy", sandbox.SessionProgram{Code: "print('runs')"})
	if err != nil || res.Outputs == nil || res.OutputsNote != "" {
		t.Errorf("a session once there is room: err %v, outputs %v, note %q; want its output folder", err, res.Outputs, res.OutputsNote)
	}
	if res.Outputs != nil {
		res.Outputs.Remove()
	}
}
