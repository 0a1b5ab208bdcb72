package storage

import (
	"io/fs"
	"os"
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
	searchable(f)
	return f, nil
}

func openNoFollow(root *os.Root, dir string) (*os.File, error) {
	return root.OpenFile(dir, os.O_RDONLY|oNonblock|oDirectory|oNoFollow, 0)
}

// ownDir reports whether dir is a directory (not a symlink) the server's
// user owns, and its permissions.
func ownDir(root *os.Root, dir string) (fs.FileMode, bool) {
	fi, err := root.Lstat(dir)
	if err != nil || !fi.IsDir() {
		return 0, false
	}
	uid, _, ok := ownerOf(fi)
	return fi.Mode().Perm(), ok && uid == os.Geteuid()
}
