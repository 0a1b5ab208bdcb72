package storage

import (
	"io/fs"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// openDir opens dir under root for reading, not following a symlink. When
// permission is denied and the server owns the folder (it runs as the
// same user as its programs, as on a desktop), it gives itself read and
// search permission back and opens it again: a folder the server owns can
// always be measured. A folder it can open but not search is repaired the
// same way.
func openDir(root *os.Root, dir string) (*os.File, error) {
	f, err := openNoFollow(root, dir)
	if err != nil {
		mode, own := ownDir(root, dir)
		if !denied(err) || !own {
			return nil, err
		}
		if err := root.Chmod(dir, mode|0o700); err != nil {
			return nil, err
		}
		if f, err = openNoFollow(root, dir); err != nil {
			return nil, err
		}
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err == nil && os.Geteuid() != 0 &&
		int(st.Uid) == os.Geteuid() && st.Mode&0o500 != 0o500 {
		_ = f.Chmod(fs.FileMode(st.Mode&0o7777) | 0o700) // a failure shows as a denied stat
	}
	return f, nil
}

func openNoFollow(root *os.Root, dir string) (*os.File, error) {
	return root.OpenFile(dir, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_DIRECTORY|syscall.O_NOFOLLOW, 0)
}

// ownDir reports whether dir is a directory (not a symlink) the server's
// user owns, and its permissions.
func ownDir(root *os.Root, dir string) (fs.FileMode, bool) {
	fi, err := root.Lstat(dir)
	if err != nil || !fi.IsDir() {
		return 0, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return fi.Mode().Perm(), ok && int(st.Uid) == os.Geteuid()
}
