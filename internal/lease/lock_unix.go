//go:build !windows

package lease

import (
	"errors"
	"os"
	"syscall"
)

// oNonblock: opening a FIFO swapped in for the file must not block.
const oNonblock = syscall.O_NONBLOCK

// lockFile takes an exclusive flock on f, waiting for it with wait, else
// failing with ErrHeld when another process holds it. The lock lives as
// long as f is open.
func lockFile(f *os.File, wait bool) error {
	how := syscall.LOCK_EX
	if !wait {
		how |= syscall.LOCK_NB
	}
	sc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := sc.Control(func(fd uintptr) { ferr = syscall.Flock(int(fd), how) }); err != nil {
		return err
	}
	if errors.Is(ferr, syscall.EWOULDBLOCK) {
		return ErrHeld
	}
	return ferr
}

// deletePending: on Unix a removed file has no name left, which sameFile
// sees.
func deletePending(*os.File) bool { return false }
