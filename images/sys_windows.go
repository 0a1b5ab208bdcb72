package images

import (
	"errors"
	"os"
	"os/exec"

	"golang.org/x/sys/windows"
)

// tryLock takes an exclusive LockFileEx lock on f without waiting; held is
// true when another handle has it.
func tryLock(f *os.File) (held bool, err error) {
	flags := uint32(windows.LOCKFILE_EXCLUSIVE_LOCK | windows.LOCKFILE_FAIL_IMMEDIATELY)
	err = windows.LockFileEx(windows.Handle(f.Fd()), flags, 0, 1, 0, new(windows.Overlapped))
	if errors.Is(err, windows.ERROR_LOCK_VIOLATION) {
		return true, nil
	}
	return false, err
}

// ownGroup: the offline build (debootstrap, chroot) runs on Linux only;
// on Windows cmd keeps exec's default cancellation.
func ownGroup(*exec.Cmd) {}

// killGroup: see ownGroup.
func killGroup(*exec.Cmd) {}
