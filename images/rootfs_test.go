//go:build linux

package images

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// entry is what the tests check of one tar member.
type entry struct {
	Type     byte
	Mode     int64
	Link     string
	Content  string
	Uid, Gid int
}

func TestWriteRootfs(t *testing.T) {
	root := t.TempDir()
	mkdir(t, root, "etc", 0o755)
	write(t, root, "etc/os-release", "bookworm\n", 0o644)
	mkdir(t, root, "usr/bin", 0o755)
	write(t, root, "usr/bin/su", "#!/bin/sh\n", os.ModeSetuid|0o755)
	write(t, root, "usr/bin/tool", "tool", 0o750)
	if err := os.Symlink("tool", filepath.Join(root, "usr/bin/alias")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/nowhere/at/all", filepath.Join(root, "dangling")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(root, "usr/bin/fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	mkdir(t, root, "proc/1", 0o555)
	write(t, root, "proc/version", "host", 0o444)
	mkdir(t, root, "dev", 0o755)
	write(t, root, "dev/null", "not a device", 0o666)
	uid, gid := os.Getuid(), os.Getgid()
	if os.Geteuid() == 0 {
		uid, gid = 1234, 5678
		if err := os.Lchown(filepath.Join(root, "etc/os-release"), uid, gid); err != nil {
			t.Fatal(err)
		}
	}

	var buf bytes.Buffer
	if err := writeRootfs(&buf, root); err != nil {
		t.Fatalf("writeRootfs: %v", err)
	}
	me, mg := os.Getuid(), os.Getgid()
	want := map[string]entry{
		"etc/":           {tar.TypeDir, 0o755, "", "", me, mg},
		"etc/os-release": {tar.TypeReg, 0o644, "", "bookworm\n", uid, gid},
		"usr/":           {tar.TypeDir, 0o755, "", "", me, mg},
		"usr/bin/":       {tar.TypeDir, 0o755, "", "", me, mg},
		"usr/bin/su":     {tar.TypeReg, 0o4755, "", "#!/bin/sh\n", me, mg},
		"usr/bin/tool":   {tar.TypeReg, 0o750, "", "tool", me, mg},
		"usr/bin/alias":  {tar.TypeSymlink, 0o777, "tool", "", me, mg},
		"dangling":       {tar.TypeSymlink, 0o777, "/nowhere/at/all", "", me, mg},
		"proc/":          {tar.TypeDir, 0o755, "", "", me, mg},
		"dev/":           {tar.TypeDir, 0o755, "", "", me, mg},
	}
	if diff := cmp.Diff(want, readTar(t, &buf)); diff != "" {
		t.Errorf("tar members (-want +got):\n%s", diff)
	}
}

func readTar(t *testing.T, r io.Reader) map[string]entry {
	t.Helper()
	got := map[string]entry{}
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return got
		}
		if err != nil {
			t.Fatalf("read tar: %v", err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatalf("read %s: %v", hdr.Name, err)
		}
		got[hdr.Name] = entry{hdr.Typeflag, hdr.Mode, hdr.Linkname, string(data), hdr.Uid, hdr.Gid}
	}
}

func TestTrimRootfs(t *testing.T) {
	root := t.TempDir()
	mkdir(t, root, "var/cache/apt/archives/partial", 0o755)
	mkdir(t, root, "var/lib/apt/lists/partial", 0o755)
	mkdir(t, root, "etc", 0o755)
	write(t, root, "var/cache/apt/archives/python3_3.11.deb", "deb", 0o644)
	write(t, root, "var/cache/apt/pkgcache.bin", "bin", 0o644)
	write(t, root, "var/lib/apt/lists/deb.debian.org_Packages", "lists", 0o644)
	write(t, root, "etc/hostname", "the-host\n", 0o644)
	write(t, root, "etc/resolv.conf", "nameserver 10.0.0.1\n", 0o644)
	write(t, root, "etc/os-release", "bookworm\n", 0o644)
	if err := trimRootfs(root); err != nil {
		t.Fatalf("trimRootfs: %v", err)
	}
	for _, gone := range []string{"var/cache/apt/archives/python3_3.11.deb", "var/cache/apt/pkgcache.bin",
		"var/lib/apt/lists/deb.debian.org_Packages", "var/lib/apt/lists/partial"} {
		if _, err := os.Lstat(filepath.Join(root, gone)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still exists (err %v)", gone, err)
		}
	}
	for name, want := range map[string]string{"etc/hostname": "", "etc/resolv.conf": "", "etc/os-release": "bookworm\n"} {
		if got := read(t, root, name); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "var/cache/apt/archives/partial")); err != nil {
		t.Errorf("archives/partial removed: %v", err)
	}
}

// TestRemoveTreeKeepsMounts proves that cleaning a debootstrap directory
// never deletes through a mount left inside it: the mount is detached first.
func TestRemoveTreeKeepsMounts(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting needs root")
	}
	outside := t.TempDir()
	write(t, outside, "precious", "host data", 0o644)
	dir := t.TempDir()
	mkdir(t, dir, "rootfs/proc", 0o755)
	target := filepath.Join(dir, "rootfs/proc")
	if out, err := exec.Command("mount", "--bind", outside, target).CombinedOutput(); err != nil {
		t.Skipf("bind mount not possible here: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", target).Run() }) // only if the test failed
	if got := read(t, dir, "rootfs/proc/precious"); got != "host data" {
		t.Fatalf("bind mount not visible: %q", got)
	}
	if err := removeTree(dir); err != nil {
		t.Fatalf("removeTree: %v", err)
	}
	if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s still exists (err %v)", dir, err)
	}
	if got := read(t, outside, "precious"); got != "host data" {
		t.Errorf("file behind the mount = %q, want it untouched", got)
	}
}

func TestUnescapeMount(t *testing.T) {
	for in, want := range map[string]string{
		`/tmp/a\040b`: "/tmp/a b", `/plain`: "/plain", `/tab\011x`: "/tab\tx", `/bad\09`: `/bad\09`, `/end\04`: `/end\04`,
	} {
		if got := unescapeMount(in); got != want {
			t.Errorf("unescapeMount(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestTailBuffer(t *testing.T) {
	tb := &tailBuffer{max: 8}
	for _, s := range []string{"hello ", "wide ", "world\n"} {
		if n, err := tb.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", s, n, err)
		}
	}
	if got, want := tb.String(), "...\ne world"; got != want { // cut output is marked
		t.Errorf("tail = %q, want %q", got, want)
	}
}

func mkdir(t *testing.T, root, name string, mode os.FileMode) {
	t.Helper()
	p := filepath.Join(root, name)
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, root, name, data string, mode os.FileMode) {
	t.Helper()
	p := filepath.Join(root, name)
	if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil { // WriteFile's mode is filtered by umask
		t.Fatal(err)
	}
}

func read(t *testing.T, root, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
