package storage

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// nobody is the uid the tests below run as when started as root.
const nobody = 65534

// asNonRoot runs the calling test again as uid 65534 (setpriv) when the
// tests run as root, which reads every folder: the server of a desktop
// user is not root. It returns false in the parent, which has nothing
// more to do.
func asNonRoot(t *testing.T, dirs ...string) bool {
	t.Helper()
	if os.Geteuid() != 0 {
		return true
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("running as root without setpriv: cannot test as a regular user")
	}
	for _, d := range dirs {
		if err := os.Chown(d, nobody, nobody); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(setpriv, "--reuid", "65534", "--regid", "65534", "--clear-groups",
		os.Args[0], "-test.run", "^"+t.Name()+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "PYBOX_TEST_CHILD=1")
	out, err := cmd.CombinedOutput()
	t.Logf("as uid %d:\n%s", nobody, out)
	if err != nil {
		t.Fatalf("the test failed as uid %d: %v", nobody, err)
	}
	return false
}

// tempDirFor makes a folder the non-root child can use (t.TempDir's
// parent is root's 0700).
func tempDirFor(t *testing.T) string {
	t.Helper()
	if os.Getenv("PYBOX_TEST_CHILD") != "" {
		return os.Getenv("PYBOX_TEST_DIR")
	}
	d, err := os.MkdirTemp("", "pybox-unreadable-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	os.Setenv("PYBOX_TEST_DIR", d) // read by the child only
	return d
}

// A program running as the server's own user makes a folder the server
// cannot read (mode 0300) and fills it: the measure must see what it holds
// (the server owns it, so it reads it again), never skip it silently.
func TestMeasureSeesAFolderMadeUnreadableByItsOwner(t *testing.T) {
	dir := tempDirFor(t)
	if !asNonRoot(t, dir) {
		return
	}
	hidden := filepath.Join(dir, "hidden")
	if err := os.Mkdir(hidden, 0o700); err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		if err := os.WriteFile(filepath.Join(hidden, "f"+string(rune('a'+i%26))+string(rune('a'+i/26))), make([]byte, 4096), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, mode := range []os.FileMode{0o300, 0o000, 0o600} {
		if err := os.Chmod(hidden, mode); err != nil {
			t.Fatal(err)
		}
		u, err := Measure(dir, Usage{})
		if err != nil || u.Files != 51 || u.Bytes < 50*4096 {
			t.Fatalf("mode %o: measured %+v, %v; want 51 entries and at least 200 KiB", mode, u, err)
		}
	}
}

// A folder the server neither can read nor owns is reported, never
// counted as empty.
func TestMeasureReportsAFolderItCannotRead(t *testing.T) {
	dir := tempDirFor(t)
	if os.Getenv("PYBOX_TEST_CHILD") == "" && os.Geteuid() == 0 {
		locked := filepath.Join(dir, "locked")
		if err := os.Mkdir(locked, 0o700); err != nil { // root's
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(locked, "big"), make([]byte, 1<<20), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if !asNonRoot(t, dir) {
		return
	}
	if _, err := os.Stat(filepath.Join(dir, "locked")); err != nil {
		t.Skip("needs a folder of another user (run as root, which starts the check as uid 65534)")
	}
	u, err := Measure(dir, Usage{})
	if !errors.Is(err, ErrUnreadable) {
		t.Fatalf("measured %+v, err %v; want ErrUnreadable", u, err)
	}
	t.Logf("%+v: %v", u, err)
}
