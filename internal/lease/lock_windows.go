package lease

import (
	"errors"
	"os"
	"unsafe"

	"golang.org/x/sys/windows"
)

// oNonblock: Windows folders hold no FIFOs, so no open blocks.
const oNonblock = 0

// lockFile takes an exclusive LockFileEx lock on f's first byte, waiting
// for it with wait, else failing with ErrHeld when another handle holds
// it. Windows drops the lock when f is closed or its process ends, as
// flock does on Unix.
func lockFile(f *os.File, wait bool) error {
	flags := uint32(windows.LOCKFILE_EXCLUSIVE_LOCK)
	if !wait {
		flags |= windows.LOCKFILE_FAIL_IMMEDIATELY
	}
	sc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var lerr error
	err = sc.Control(func(fd uintptr) {
		lerr = windows.LockFileEx(windows.Handle(fd), flags, 0, 1, 0, new(windows.Overlapped))
	})
	if err != nil {
		return err
	}
	if errors.Is(lerr, windows.ERROR_LOCK_VIOLATION) || errors.Is(lerr, windows.ERROR_IO_PENDING) {
		return ErrHeld
	}
	return lerr
}

// fileStandardInfo is Windows' FILE_STANDARD_INFO.
type fileStandardInfo struct {
	AllocationSize, EndOfFile int64
	NumberOfLinks             uint32
	DeletePending, Directory  bool
}

// deletePending reports whether f was removed while open. Where Windows
// removes with its older semantics (before Windows 10 1809, some file
// systems) the name stays until the last handle closes, so a lease file a
// reaper removed would still look like the path's file; it is not a lease.
func deletePending(f *os.File) bool {
	var info fileStandardInfo
	err := windows.GetFileInformationByHandleEx(windows.Handle(f.Fd()), windows.FileStandardInfo,
		(*byte)(unsafe.Pointer(&info)), uint32(unsafe.Sizeof(info)))
	return err == nil && info.DeletePending
}
