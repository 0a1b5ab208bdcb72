package engine_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/mount"
)

// TestReadFilesSeesBindsWithoutRunning: ReadFiles returns the files of a
// bind mount as a container sees them, runs nothing (the command would
// have left a file in the mount), refuses what is not a regular file of
// at most max bytes (a symlink planted for a host file outside the mount
// is not read through), and leaves no container (setup's check).
func TestReadFilesSeesBindsWithoutRunning(t *testing.T) {
	eng, img := setup(t)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a"), []byte("first\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "b"), []byte(""), 0o600)
	os.WriteFile(filepath.Join(dir, "big"), []byte(strings.Repeat("x", 65)), 0o600)
	os.Mkdir(filepath.Join(dir, "sub"), 0o700)
	// A trap a program beside could set: the name swapped for a symlink to
	// a host file outside the mount. Never read through.
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte("host secret\n"), 0o600)
	os.Symlink(secret, filepath.Join(dir, "link"))
	sp := spec(t, img, "sh", "-c", "touch /check/ran")
	sp.Config.User = "0:0"
	sp.Host.Mounts = []mount.Mount{{Type: mount.TypeBind, Source: dir, Target: "/check"}}

	got, err := eng.ReadFiles(t.Context(), sp, []string{"/check/a", "/check/b"}, 64)
	if err != nil || len(got) != 2 || string(got[0]) != "first\n" || len(got[1]) != 0 {
		t.Fatalf("ReadFiles: %q, %v; want \"first\\n\" and \"\"", got, err)
	}
	for path, want := range map[string]string{
		"/check/big":  "65 bytes, more than 64",
		"/check/sub":  "not a regular file",
		"/check/no":   "/check/no",
		"/check/link": "not a regular file",
	} {
		sp.Name += "x" // a fresh name: the last one was removed, and the daemon may still hold it
		got, err := eng.ReadFiles(t.Context(), sp, []string{"/check/a", path}, 64)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(fmt.Sprint(got, err), "host secret") {
			t.Errorf("ReadFiles of %s: %q, %v; want an error saying %q", path, got, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "ran")); !os.IsNotExist(err) {
		t.Errorf("the container's command ran (%v): ReadFiles must not start it", err)
	}
}
