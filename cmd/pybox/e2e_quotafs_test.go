//go:build linux

package main

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pybox-dev/pybox/internal/quotafs"
)

// floodProgram writes as fast as it can with four processes, two dense
// files and two sparse ones (256 KiB in each MiB), far past the quota.
const floodProgram = `import os
os.makedirs('flood', exist_ok=True)
def dense(i):
    with open(f'flood/dense{i}', 'wb', buffering=0) as f:
        for _ in range(200):
            f.write(b'x' * (1 << 20))
def sparse(i):
    with open(f'flood/sparse{i}', 'wb', buffering=0) as f:
        for k in range(200):
            f.seek(k << 20)
            f.write(b'y' * (256 << 10))
pids = []
for i, w in enumerate([dense, dense, sparse, sparse]):
    pid = os.fork()
    if pid == 0:
        try:
            w(i)
            os._exit(0)
        except OSError as e:
            print('writer', i, 'refused:', e.strerror, flush=True)
            os._exit(1)
    pids.append(pid)
codes = [os.waitpid(p, 0)[1] for p in pids]
print('wrote everything' if not any(codes) else 'some writers were refused')
`

// ownerFiles adds up the files in dirs: the apparent size of the dense
// ones, the sparse ones' apart, and what all of them take on disk.
func ownerFiles(t *testing.T, dirs ...string) (dense, sparse, allocated int64) {
	t.Helper()
	for _, d := range dirs {
		err := filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
			if err != nil || !e.Type().IsRegular() {
				return err
			}
			fi, err := e.Info()
			if err != nil {
				return err
			}
			allocated += fi.Sys().(*syscall.Stat_t).Blocks * 512
			if strings.HasPrefix(e.Name(), "sparse") {
				sparse += fi.Size()
			} else {
				dense += fi.Size()
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return dense, sparse, allocated
}

// mountsUnder is what `losetup -a` and the mount table say about dirs
// (other tests on the machine mount and unmount meanwhile).
func mountsUnder(t *testing.T, dirs ...string) []string {
	t.Helper()
	loops, err := exec.Command("losetup", "-a").Output()
	if err != nil {
		t.Fatal(err)
	}
	mounts, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for line := range strings.Lines(string(loops) + string(mounts)) {
		for _, d := range dirs {
			if strings.Contains(line, d) {
				out = append(out, strings.TrimSpace(line))
				break
			}
		}
	}
	return out
}

// A program writing as fast as it can, dense and sparse, cannot take its
// owner past the quota by more than the headroom: with the owner's
// folders on a filesystem of its own (PYBOX_QUOTA_MODE=filesystem) the
// kernel refuses the writes as they are made, and the result says
// quota_exceeded. The meter alone let the same flood through by tens to
// hundreds of MiB (it stops the program after it measured). A restart
// reuses the image with the files; stopping the server leaves no mount
// and no loop device.
func TestFilesystemQuotaRefusesAFloodAtWriteTime(t *testing.T) {
	if err := quotafs.Available(); err != nil {
		t.Skip(err)
	}
	eachRuntime(t, testFilesystemQuotaRefusesAFlood)
}

func testFilesystemQuotaRefusesAFlood(t *testing.T) {
	const quotaMiB = 32
	storageDir, state := t.TempDir(), t.TempDir()
	t.Cleanup(func() { // after the servers' own cleanups
		// The loop device detaches once the last container that had the
		// folders mounted is gone (they are removed in the background).
		deadline := time.Now().Add(30 * time.Second)
		for left := mountsUnder(t, storageDir, state); len(left) > 0; left = mountsUnder(t, storageDir, state) {
			if time.Now().After(deadline) {
				t.Errorf("the test left mounts or loop devices 30 s after its servers stopped:\n%s", strings.Join(left, "\n"))
				return
			}
			time.Sleep(100 * time.Millisecond) // polling the kernel's tables: there is no event to wait for
		}
	})
	env := []string{"PYBOX_QUOTA_MODE=filesystem", "PYBOX_WORKSPACE_QUOTA=32m", "PYBOX_WORKSPACE_MAX_FILES=2000",
		"CODE_STORAGE_DIR=" + storageDir, "PYBOX_STATE_DIR=" + state}
	s := startServer(t, env...)
	out, res := s.exec(map[string]any{"code": floodProgram, "timeout_s": 120})
	dense, sparse, allocated := ownerFiles(t, storageDir, filepath.Join(state, "sessions"), filepath.Join(state, "runs"))
	t.Logf("after the flood: dense files %d KiB, sparse files %d KiB apparent, %d KiB allocated in all (quota %d MiB); stdout:\n%s",
		dense>>10, sparse>>10, allocated>>10, quotaMiB, out.Stdout)
	if !out.QuotaExceeded || !strings.Contains(text(res), "quota") || strings.Contains(out.Stdout, "wrote everything") {
		t.Fatalf("quota_exceeded=%v; want the flood stopped for the quota:\n%s", out.QuotaExceeded, text(res))
	}
	if bound := int64(quotaMiB<<20 + quotafs.Headroom + 512<<10); allocated > bound || dense > bound {
		t.Fatalf("the owner holds %d KiB on disk (%d KiB in dense files); the quota is %d MiB, the bound %d KiB", allocated>>10, dense>>10, quotaMiB, bound>>10)
	}
	written, err := os.ReadDir(filepath.Join(storageDir, "flood"))
	if err != nil {
		t.Fatal(err)
	}
	s.close()
	if _, err := os.Stat(filepath.Join(storageDir, "flood")); err == nil {
		t.Fatal("the owner's files show in the code storage folder after the server stopped: its image is still mounted")
	}
	s = startServer(t, env...)
	if kept, err := os.ReadDir(filepath.Join(storageDir, "flood")); err != nil || len(kept) != len(written) {
		t.Fatalf("after a restart, the code storage holds %d of the %d files written (%v)", len(kept), len(written), err)
	}
	out, res = s.exec(map[string]any{"code": "import shutil\nshutil.rmtree('flood')\nprint('cleaned')"})
	if out.ExitCode != 0 || out.QuotaExceeded || !strings.Contains(out.Stdout, "cleaned") {
		t.Fatalf("a program that only deletes files, over the quota: %s", text(res))
	}
	if res := s.call("write_file", map[string]any{"path": "note.txt", "content": "hello"}); res.IsError {
		t.Fatalf("write_file after the cleanup: %s", text(res))
	}
}
