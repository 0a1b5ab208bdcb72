//go:build linux

package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pybox-dev/pybox/internal/quotafs"
)

// writeQuietly writes 64 MiB in one write, which the kernel cuts short
// (or refuses) at the quota (ENOSPC), and ends normally: the program itself
// says nothing of the quota.
const writeQuietly = `import os
fd = os.open(%q, os.O_WRONLY | os.O_CREAT, 0o644)
try:
    n = os.write(fd, b'x' * (64 << 20))
    print('wrote everything' if n == 64 << 20 else 'cut short')
except OSError as e:
    print('refused:', e.strerror)
`

// A session turn whose writes the kernel refused at the workspace quota
// (PYBOX_QUOTA_MODE=filesystem) ends with the same note as a stateless
// run: quota_exceeded, and a text saying the quota was met. Here the owner
// is full already (a stateless run filled it after the session started), so the turn's write is
// refused at once and the meter sees no growth to stop. Before the fix a
// session turn had no end-of-run check: the program caught ENOSPC, ended
// with exit 0, and nothing told the client why its writes failed.
func TestFilesystemQuotaSessionTurnNoted(t *testing.T) {
	if err := quotafs.Available(); err != nil {
		t.Skip(err)
	}
	eachRuntime(t, testFilesystemQuotaSessionTurnNoted)
}

func testFilesystemQuotaSessionTurnNoted(t *testing.T) {
	storageDir, state := t.TempDir(), t.TempDir()
	t.Cleanup(func() { waitNoMounts(t, storageDir, state) })
	s := startServer(t, "PYBOX_QUOTA_MODE=filesystem", "PYBOX_WORKSPACE_QUOTA=16m", "PYBOX_WORKSPACE_MAX_FILES=2000",
		"CODE_STORAGE_DIR="+storageDir, "PYBOX_STATE_DIR="+state)
	if out := s.sessionRun("full", "print('started')"); out.Stdout != "started\n" {
		t.Fatalf("the session's first call: %+v", out)
	}
	out, res := s.exec(map[string]any{"code": fmt.Sprintf(writeQuietly, "fill"), "timeout_s": 120})
	if !out.QuotaExceeded {
		t.Fatalf("a stateless run filling the workspace: quota_exceeded=false\n%s", text(res))
	}
	out, res = s.exec(map[string]any{"code": fmt.Sprintf(writeQuietly, "more"), "session_id": "full", "timeout_s": 120})
	if strings.Contains(out.Stdout, "wrote everything") {
		t.Fatalf("the session wrote 64 MiB past a full 16 MiB quota:\n%s", text(res))
	}
	if !out.QuotaExceeded || !res.IsError || !strings.Contains(text(res), "quota") {
		t.Fatalf("quota_exceeded=%v is_error=%v; want the turn noted as having met the workspace quota:\n%s", out.QuotaExceeded, res.IsError, text(res))
	}
}

// waitNoMounts waits (30 s at most) until no mount or loop device under
// dirs is left: the loop device detaches once the last container that had
// the folders mounted is gone (they are removed in the background).
func waitNoMounts(t *testing.T, dirs ...string) {
	deadline := time.Now().Add(30 * time.Second)
	for left := mountsUnder(t, dirs...); len(left) > 0; left = mountsUnder(t, dirs...) {
		if time.Now().After(deadline) {
			t.Errorf("the test left mounts or loop devices 30 s after its servers stopped:\n%s", strings.Join(left, "\n"))
			return
		}
		time.Sleep(100 * time.Millisecond) // polling the kernel's tables: there is no event to wait for
	}
}
