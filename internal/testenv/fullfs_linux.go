package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// SmallFS mounts a small tmpfs (1 MiB, 64 inodes) on a folder of t's and
// returns it; Fill then makes it full. Skips t without root; unmounted
// when t ends.
func SmallFS(t testing.TB) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=1m,nr_inodes=64,mode=0755"); err != nil {
		t.Skipf("mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}

// Fill takes every inode left on a SmallFS with empty files in dir, so
// that a new file or folder there fails with ENOSPC, as on an owner's full
// quota filesystem; free removes them (room again).
func Fill(t testing.TB, dir string) (free func()) {
	t.Helper()
	var made []string
	free = func() {
		for _, p := range made {
			os.Remove(p)
		}
	}
	for i := 0; ; i++ {
		p := filepath.Join(dir, fmt.Sprintf(".fill%d", i))
		err := os.WriteFile(p, nil, 0o644)
		if errors.Is(err, syscall.ENOSPC) {
			return free
		}
		if err != nil || i > 1000 {
			free()
			t.Fatalf("fill the tmpfs: %v after %d files", err, i)
		}
		made = append(made, p)
	}
}
