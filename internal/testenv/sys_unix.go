//go:build !windows

package testenv

import (
	"os"
	"syscall"
)

// killPid sends SIGKILL to pid (best effort).
func killPid(pid int) { _ = syscall.Kill(pid, syscall.SIGKILL) }

// lockExclusive waits for an exclusive flock on f.
func lockExclusive(f *os.File) error { return syscall.Flock(int(f.Fd()), syscall.LOCK_EX) }
