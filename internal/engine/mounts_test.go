package engine

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
)

// TestCheckBindSources: a bind source with a symlink anywhere on its path,
// or a path that is not clean and absolute, is refused before any request.
func TestCheckBindSources(t *testing.T) {
	root := t.TempDir()
	real := filepath.Join(root, "real", "ws")
	if err := os.MkdirAll(real, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "real"), filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, filepath.Join(root, "wslink")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		src string
		ok  bool
	}{
		{real, true},
		{filepath.Join(root, "wslink"), false},     // the folder itself is a symlink
		{filepath.Join(root, "link", "ws"), false}, // a parent is
		{"relative/ws", false},
		{real + "/../ws", false},
		{filepath.Join(root, "missing"), false},
	}
	for _, tt := range tests {
		err := checkBindSources([]mount.Mount{{Type: mount.TypeBind, Source: tt.src, Target: "/workspace"}})
		if (err == nil) != tt.ok || (err != nil && !errors.Is(err, ErrMount)) {
			t.Errorf("checkBindSources(%s) = %v; want ok %v", tt.src, err, tt.ok)
		}
	}
}

// TestVerifyMounts: the daemon's record must hold exactly the requested
// binds: same source, target and mode, nothing more.
func TestVerifyMounts(t *testing.T) {
	want := []mount.Mount{{Type: mount.TypeBind, Source: "/s/code", Target: "/workspace"},
		{Type: mount.TypeBind, Source: "/s/runs/r1", Target: "/workspace/outputs/r1"}}
	got := func(ms ...container.MountPoint) container.InspectResponse {
		return container.InspectResponse{Mounts: ms}
	}
	ws := container.MountPoint{Type: mount.TypeBind, Source: "/s/code", Destination: "/workspace", RW: true}
	out := container.MountPoint{Type: mount.TypeBind, Source: "/s/runs/r1", Destination: "/workspace/outputs/r1", RW: true}
	tests := []struct {
		name string
		ins  container.InspectResponse
		ok   bool
	}{
		{"as asked", got(out, ws), true},
		{"another source", got(container.MountPoint{Type: mount.TypeBind, Source: "/home/u", Destination: "/workspace", RW: true}, out), false},
		{"read-only instead", got(container.MountPoint{Type: mount.TypeBind, Source: "/s/code", Destination: "/workspace"}, out), false},
		{"one missing", got(ws), false},
		{"one more", got(ws, out, container.MountPoint{Type: mount.TypeBind, Source: "/", Destination: "/host", RW: true}), false},
	}
	for _, tt := range tests {
		if err := verifyMounts(tt.ins, want); (err == nil) != tt.ok {
			t.Errorf("%s: verifyMounts = %v; want ok %v", tt.name, err, tt.ok)
		}
	}
}
