//go:build !windows

package app

import (
	"runtime"
	"syscall"
)

// chownsForSandbox: run as root on Linux, pybox gives the sandbox user the
// folders it makes (the daemon shares the host's uids). Docker Desktop on
// a Mac maps every file of a shared folder to the user who runs it, so
// there pybox never changes an owner.
const chownsForSandbox = runtime.GOOS == "linux"

// fileOwner is the uid and gid of the file at path.
func fileOwner(path string) (uid, gid int, ok bool) {
	var st syscall.Stat_t
	if syscall.Stat(path, &st) != nil {
		return 0, 0, false
	}
	return int(st.Uid), int(st.Gid), true
}
