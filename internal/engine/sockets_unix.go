//go:build !windows

package engine

import (
	"cmp"
	"os"
	"path/filepath"
)

// defaultHost is the engine's socket when nothing else names one.
const defaultHost = "unix:///var/run/docker.sock"

// desktopSockets are the desktop engines' usual sockets on macOS and
// Linux, in the order they are tried.
func desktopSockets(env Env) []Candidate {
	home := env.home()
	out := []Candidate{
		sock("Docker Desktop", filepath.Join(home, ".docker", "run", "docker.sock")),
		sock("Docker Desktop for Linux", filepath.Join(home, ".docker", "desktop", "docker.sock")),
		sock("OrbStack", filepath.Join(home, ".orbstack", "run", "docker.sock")),
		sock("Colima", filepath.Join(cmp.Or(env.get("COLIMA_HOME"), filepath.Join(home, ".colima")), "default", "docker.sock")),
		sock("Colima", filepath.Join(home, ".config", "colima", "default", "docker.sock")),
		sock("Rancher Desktop", filepath.Join(home, ".rd", "docker.sock")),
	}
	if run := env.get("XDG_RUNTIME_DIR"); run != "" {
		out = append(out, sock("Podman", filepath.Join(run, "podman", "podman.sock")))
	}
	tmp := cmp.Or(env.get("TMPDIR"), os.TempDir())
	return append(out,
		sock("Podman machine", filepath.Join(tmp, "podman", "podman-machine-default-api.sock")),
		sock("Podman machine", filepath.Join(home, ".local", "share", "containers", "podman", "machine", "podman.sock")),
		sock("Podman machine", filepath.Join(home, ".local", "share", "containers", "podman", "machine", "qemu", "podman.sock")),
	)
}
