package engine

import (
	"path/filepath"
	"runtime"
	"slices"
	"testing"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
)

// hostFolder is an absolute folder path as this platform spells it.
func hostFolder(parts ...string) string {
	if runtime.GOOS == "windows" {
		return `C:\` + filepath.Join(parts...)
	}
	return "/" + filepath.Join(parts...)
}

// TestVerifyMountsDesktopSpellings: the daemon may record the workspace in
// the desktop engine's spelling of the same host folder (Docker Desktop:
// /run/desktop/mnt/host/c/... for C:\..., /host_mnt/Users/... on a Mac);
// that is the folder asked for. A spelling of another folder is not.
func TestVerifyMountsDesktopSpellings(t *testing.T) {
	src := hostFolder("Users", "me", "code")
	want := []mount.Mount{{Type: mount.TypeBind, Source: src, Target: "/workspace"}}
	record := func(source string) container.InspectResponse {
		return container.InspectResponse{Mounts: []container.MountPoint{{Type: mount.TypeBind, Source: source, Destination: "/workspace", RW: true}}}
	}
	for _, s := range append(desktopSpellings(src), src) {
		if err := verifyMounts(record(s), want); err != nil {
			t.Errorf("recorded as %s: %v; want the same folder", s, err)
		}
	}
	for _, s := range desktopSpellings(hostFolder("Users", "me", "other")) {
		if err := verifyMounts(record(s), want); err == nil {
			t.Errorf("recorded as %s: accepted for %s", s, src)
		}
	}
	if err := verifyMounts(record(hostFolder("Users", "me")), want); err == nil {
		t.Errorf("the parent folder was accepted for %s", src)
	}
	wantSpellings := map[string][]string{
		"windows": {"/run/desktop/mnt/host/c/Users/me/code", "/host_mnt/c/Users/me/code", "/c/Users/me/code", "C:/Users/me/code"},
		"darwin":  {"/host_mnt/Users/me/code"},
	}[runtime.GOOS]
	if got := desktopSpellings(src); !slices.Equal(got, wantSpellings) {
		t.Errorf("desktopSpellings(%s) = %q, want %q", src, got, wantSpellings)
	}
}
