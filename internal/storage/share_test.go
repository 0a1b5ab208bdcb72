//go:build !windows

package storage_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/pybox-dev/pybox/internal/storage"
)

// TestStorageShare: a shared folder is the group's (setgid, group-writable)
// with everything pybox makes in it; entries an earlier version left
// writable by their owner only (the sandbox user's) become group-writable,
// and nothing else changes (other owners' entries, read-only files, what a
// symlink points at).
func TestStorageShare(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown needs root")
	}
	const uid, gid = 10001, 10001
	d := open(t)
	root := d.Path()
	outside := filepath.Join(t.TempDir(), "outside")
	put(t, outside, "x")
	old := map[string]fs.FileMode{"old": 0o755, "old/a.txt": 0o644, "old/ro.txt": 0o444, "root.txt": 0o644}
	for _, rel := range []string{"old", "old/a.txt", "old/ro.txt", "root.txt"} {
		p := filepath.Join(root, rel)
		if rel == "old" {
			mustMkdir(t, p)
		} else {
			put(t, p, "x")
		}
		if err := os.Chmod(p, old[rel]); err != nil {
			t.Fatal(err)
		}
		if rel != "root.txt" {
			mustChown(t, p, uid, gid)
		}
	}
	if err := os.Symlink(outside, filepath.Join(root, "old", "link")); err != nil {
		t.Fatal(err)
	}
	if err := d.Share(uid, gid); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Sub("new/deeper"); err != nil {
		t.Fatal(err)
	}
	if err := d.Write("new/deeper/w.txt", []byte("y")); err != nil {
		t.Fatal(err)
	}
	want := map[string]fs.FileMode{
		".": storage.SharedDirMode | fs.ModeDir, "old": storage.SharedDirMode | fs.ModeDir, "old/a.txt": 0o664, "old/ro.txt": 0o444,
		"root.txt": 0o644, "new": storage.SharedDirMode | fs.ModeDir, "new/deeper": storage.SharedDirMode | fs.ModeDir, "new/deeper/w.txt": 0o664,
	}
	for rel, mode := range want {
		fi, err := os.Lstat(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != mode {
			t.Errorf("%s: mode %v; want %v", rel, fi.Mode(), mode)
		}
		if st := fi.Sys().(*syscall.Stat_t); rel != "root.txt" && (st.Uid != uid || st.Gid != gid) {
			t.Errorf("%s: owner %d:%d; want %d:%d", rel, st.Uid, st.Gid, uid, gid)
		}
	}
	// Once shared, a folder is not walked again.
	again := filepath.Join(root, "old", "again.txt")
	put(t, again, "z")
	mustChown(t, again, uid, gid)
	if err := d.Share(uid, gid); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(again); err != nil || fi.Mode() != 0o644 {
		t.Errorf("a file after a second Share: %v %v; want it untouched (0644)", fi.Mode(), err)
	}
	if fi, err := os.Stat(outside); err != nil || fi.Mode() != 0o644 {
		t.Errorf("the file a symlink points at: %v %v; want it untouched (0644)", fi.Mode(), err)
	}
}

func mustMkdir(t *testing.T, p string) {
	t.Helper()
	if err := os.Mkdir(p, 0o755); err != nil {
		t.Fatal(err)
	}
}

func mustChown(t *testing.T, p string, uid, gid int) {
	t.Helper()
	if err := os.Lchown(p, uid, gid); err != nil {
		t.Fatal(err)
	}
}
