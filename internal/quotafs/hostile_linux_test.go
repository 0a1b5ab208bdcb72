//go:build linux

package quotafs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// What a program or an earlier server could have left at the owner's
// folders is never followed, hidden or adopted: Open refuses, mounting
// nothing, and says what to do.
func TestVolumeRefusesWhatWasPreparedForIt(t *testing.T) {
	cases := map[string]struct {
		prepare func(t *testing.T, s Spec)
		want    string
	}{
		"files in a folder": {func(t *testing.T, s Spec) { write(t, filepath.Join(s.Binds[0].Target, "old.py")) }, "already holds files"},
		"a symlink at a folder": {func(t *testing.T, s Spec) {
			mkdir(t, filepath.Dir(s.Binds[1].Target))
			if err := os.Symlink(t.TempDir(), s.Binds[1].Target); err != nil {
				t.Fatal(err)
			}
		}, "not a folder"},
		"an image of someone else's": {func(t *testing.T, s Spec) {
			image := filepath.Join(s.Dir, "image.ext4")
			write(t, image)
			if err := os.Chown(image, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}, "not an image of pybox's"},
		"a mount at a folder": {func(t *testing.T, s Spec) {
			mkdir(t, s.Binds[0].Target)
			if err := unix.Mount(t.TempDir(), s.Binds[0].Target, "", unix.MS_BIND, ""); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { unix.Unmount(s.Binds[0].Target, 0) })
		}, "pybox did not make"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			s := spec(t, t.TempDir(), 8)
			mkdir(t, s.Dir)
			c.prepare(t, s)
			v, err := Open(s)
			if err == nil {
				v.Close()
				t.Fatal("Open accepted it")
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Open: %v; want %q", err, c.want)
			}
			if name == "files in a folder" && !errors.Is(err, ErrOccupied) {
				t.Errorf("Open: %v; want ErrOccupied (auto falls back to the meter)", err)
			}
			checkGone(t, &Volume{spec: s, mnt: filepath.Join(s.Dir, "mnt"), image: filepath.Join(s.Dir, "image.ext4")})
		})
	}
}

func write(t *testing.T, path string) {
	t.Helper()
	mkdir(t, filepath.Dir(path))
	if err := os.WriteFile(path, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
}

func mkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
}
