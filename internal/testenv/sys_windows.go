package testenv

import (
	"os"

	"golang.org/x/sys/windows"
)

// killPid ends pid (best effort).
func killPid(pid int) {
	if p, err := os.FindProcess(pid); err == nil {
		_ = p.Kill()
	}
}

// lockExclusive waits for an exclusive LockFileEx lock on f.
func lockExclusive(f *os.File) error {
	return windows.LockFileEx(windows.Handle(f.Fd()), windows.LOCKFILE_EXCLUSIVE_LOCK, 0, 1, 0, new(windows.Overlapped))
}
