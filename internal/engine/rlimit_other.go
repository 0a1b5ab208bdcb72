//go:build !linux

package engine

// hardLimit: off Linux the engine runs in a virtual machine (Docker
// Desktop, Podman machine, ...), whose limits are not this process's.
func hardLimit(string) (uint64, bool) { return 0, false }
