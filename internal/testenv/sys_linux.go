package testenv

import "syscall"

// orphanGuard makes a child die with the test process.
func orphanGuard() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// unmount detaches the mount at m (best effort: a test node's leftovers).
func unmount(m string) { _ = syscall.Unmount(m, syscall.MNT_DETACH) }
