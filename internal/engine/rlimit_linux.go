package engine

import "syscall"

// hardLimit is this process's hard limit of the ulimit name (nproc,
// nofile): on Linux a local Podman's runc cannot grant a container more
// than it has itself.
func hardLimit(name string) (uint64, bool) {
	res := syscall.RLIMIT_NOFILE
	switch name {
	case "nofile":
	case "nproc":
		res = 6 // RLIMIT_NPROC, not in package syscall
	default:
		return 0, false
	}
	var own syscall.Rlimit
	if syscall.Getrlimit(res, &own) != nil {
		return 0, false
	}
	return own.Max, true
}
