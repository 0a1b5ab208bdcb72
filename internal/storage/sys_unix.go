//go:build !windows

package storage

import (
	"errors"
	"io/fs"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// Open flags: never follow a final symlink, open only a directory, never
// block on a FIFO.
const (
	oNoFollow  = syscall.O_NOFOLLOW
	oDirectory = syscall.O_DIRECTORY
	oNonblock  = syscall.O_NONBLOCK
)

// lstat describes the entry without following it, against the open
// directory, so a path swapped meanwhile cannot redirect it.
func (e *entry) lstat() (fileStat, error) {
	var st unix.Stat_t
	var err error
	cerr := e.raw.Control(func(fd uintptr) {
		err = unix.Fstatat(int(fd), e.name, &st, unix.AT_SYMLINK_NOFOLLOW)
	})
	if err := errors.Join(cerr, err); err != nil {
		return fileStat{}, err
	}
	return fileStat{size: st.Size, alloc: st.Blocks * 512, regular: st.Mode&unix.S_IFMT == unix.S_IFREG}, nil
}

// ownerOf returns the uid and gid recorded in fi.
func ownerOf(fi fs.FileInfo) (uid, gid int, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return int(st.Uid), int(st.Gid), true
}

// searchable gives the server's user read and search permission on the
// open folder f when it owns it and lacks them (a failure shows as a
// denied stat later).
func searchable(f *os.File) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err == nil && os.Geteuid() != 0 &&
		int(st.Uid) == os.Geteuid() && st.Mode&0o500 != 0o500 {
		_ = f.Chmod(fs.FileMode(st.Mode&0o7777) | 0o700)
	}
}
