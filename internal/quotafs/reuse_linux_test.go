//go:build linux

package quotafs

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// kill leaves v mounted as a server killed with it would: its lock goes
// (the kernel drops a dead process's locks), its mounts stay.
func kill(v *Volume) {
	v.close.Do(func() { v.lock.Close() })
}

// mountsAt counts the mounts stacked at path.
func mountsAt(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	for sc := bufio.NewScanner(f); sc.Scan(); {
		if fields := strings.Fields(sc.Text()); len(fields) > 4 && unescape(fields[4]) == path {
			n++
		}
	}
	return n
}

// capacity is what programs may hold on v, used blocks included.
func capacity(t *testing.T, v *Volume) int64 {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(v.mnt, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Blocks-st.Bfree+st.Bavail) * st.Bsize
}

// A server killed with its mounts up: the next one reuses them (nothing
// stacked), with the files; a second server on the same state directory
// shares them, and only the last one to close unmounts.
func TestVolumeReusedAfterAKill(t *testing.T) {
	root := t.TempDir()
	s := spec(t, root, 8)
	v1, err := Open(s)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(s.Binds[1].Target, "kept")
	if err := os.WriteFile(file, make([]byte, 4<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	kill(v1)
	v2 := open(t, s)
	for _, p := range append([]string{v2.mnt}, targets(s)...) {
		if n := mountsAt(t, p); n != 1 {
			t.Errorf("%d mounts at %s after the restart; want the one left, reused", n, p)
		}
	}
	if fi, err := os.Stat(file); err != nil || fi.Size() != 4<<20 {
		t.Fatalf("the file written before the kill: %v", err)
	}
	if c := capacity(t, v2); c < s.Bytes+Headroom || c > s.Bytes+Headroom+64<<10 {
		t.Fatalf("programs may hold %d KiB with a %d KiB quota", c>>10, s.Bytes>>10)
	}
	v3, err := Open(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := v3.Close(); err != nil {
		t.Fatal(err)
	}
	if n := mountsAt(t, v2.mnt); n != 1 {
		t.Fatalf("%d mounts at %s after a second server closed while the first still uses it", n, v2.mnt)
	}
}

// A server stopped cleanly unmounts; the next start with a larger quota
// grows the image offline, one with a smaller quota keeps every file.
func TestVolumeRestartGrowsAndNeverLosesFiles(t *testing.T) {
	root := t.TempDir()
	s := spec(t, root, 8)
	v, err := Open(s)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(s.Binds[0].Target, "kept")
	if err := os.WriteFile(file, make([]byte, 6<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	checkGone(t, v)
	if _, err := os.Stat(file); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the file shows without the mount: %v", err)
	}
	s.Bytes = 32 * mib
	v = open(t, s)
	if c := capacity(t, v); c < s.Bytes+Headroom || c > s.Bytes+Headroom+64<<10 {
		t.Fatalf("programs may hold %d KiB after growing to a %d KiB quota", c>>10, s.Bytes>>10)
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	s.Bytes = 4 * mib // below what it holds
	v = open(t, s)
	if fi, err := os.Stat(file); err != nil || fi.Size() != 6<<20 {
		t.Fatalf("the file after the quota shrank below it: %v", err)
	}
	if u, err := v.Usage(); err != nil || u.Bytes < 6<<20 {
		t.Fatalf("usage %+v, %v", u, err)
	}
}
