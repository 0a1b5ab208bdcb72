//go:build linux

package sandbox_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/pybox-dev/pybox/sandbox"
)

// TestSessionStartsOnAFullRunsDir: a session started when its output
// area cannot be made (the runs folder's filesystem is full: here a tmpfs
// out of inodes, as a full quota filesystem is out of room) runs without
// one and each turn says why, where its start was an internal failure
// (CI met it on a quota filesystem a stateless run had filled).
func TestSessionStartsOnAFullRunsDir(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	runs := t.TempDir()
	if err := syscall.Mount("tmpfs", runs, "tmpfs", 0, "size=1m,nr_inodes=64,mode=0755"); err != nil {
		t.Skipf("mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(runs, syscall.MNT_DETACH) })
	sb, _ := newSandbox(t, sandbox.Config{RunsDir: runs, WarmPool: -1, Limits: sandbox.Limits{DiskReserve: -1}}) // a 1 MiB disk: no reserve
	filled := 0
	for ; filled < 1000; filled++ { // every inode left
		err := os.WriteFile(filepath.Join(runs, fmt.Sprintf("f%d", filled)), nil, 0o644)
		if errors.Is(err, syscall.ENOSPC) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if filled == 1000 {
		t.Fatal("the tmpfs did not run out of inodes")
	}
	res, err := sb.RunInSession(t.Context(), "full", sandbox.SessionProgram{Code: "print('runs')"})
	if err != nil || res.Stdout != "runs\n" || res.Outputs != nil || !strings.Contains(res.OutputsNote, "the storage quota was full when this session started") {
		t.Fatalf("a session on a full runs folder: err %v, exit %d, stdout %q, stderr %q, outputs %v, note %q; want it to run, without an output area, and say why",
			err, res.ExitCode, res.Stdout, res.Stderr, res.Outputs, res.OutputsNote)
	}
	// Room again: the next session has its area.
	for i := range filled {
		os.Remove(filepath.Join(runs, fmt.Sprintf("f%d", i)))
	}
	res, err = sb.RunInSession(t.Context(), "roomy", sandbox.SessionProgram{Code: "print('runs')"})
	if err != nil || res.Outputs == nil || res.OutputsNote != "" {
		t.Errorf("a session once there is room: err %v, outputs %v, note %q; want its output folder", err, res.Outputs, res.OutputsNote)
	}
	if res.Outputs != nil {
		res.Outputs.Remove()
	}
}
