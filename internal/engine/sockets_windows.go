package engine

// defaultHost is the engine's named pipe when nothing else names one:
// Docker Desktop's, and Rancher Desktop's in its moby mode.
const defaultHost = "npipe:////./pipe/docker_engine"

// desktopSockets are the desktop engines' usual named pipes on Windows,
// in the order they are tried (Docker Desktop's is the default, tried last).
func desktopSockets(Env) []Candidate {
	return []Candidate{
		{Host: "npipe:////./pipe/podman-machine-default", Source: "Podman machine"},
	}
}
