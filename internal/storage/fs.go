package storage

import (
	"errors"
	"fmt"
	"io/fs"
)

// FS is the directory as a read-only file system confined to the root
// (symlinks that lead out of it fail to open; fs.WalkDir does not follow
// symlinks at all).
func (d *Dir) FS() fs.FS { return d.root.FS() }

// RemoveEmpty removes the directory rel if it is empty; a directory that is
// not empty, or absent, is left as it is.
func (d *Dir) RemoveEmpty(rel string) {
	fi, err := d.root.Lstat(rel)
	if err != nil || !fi.IsDir() {
		return
	}
	_ = d.root.Remove(rel) // fails, harmlessly, when the directory is not empty
}

// Remove removes the file rel (never a directory, nor what a symlink
// points to); an absent file is no error.
func (d *Dir) Remove(rel string) error {
	fi, err := d.root.Lstat(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return d.wrap("stat", rel, err)
	}
	if fi.IsDir() {
		return fmt.Errorf("%s: %w (directory)", rel, ErrNotFile)
	}
	if err := d.root.Remove(rel); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return d.wrap("remove", rel, err)
	}
	return nil
}

// RemoveAll deletes rel and everything under it, without leaving the root
// or following symlinks; a missing rel is not an error.
func (d *Dir) RemoveAll(rel string) error {
	if err := d.root.RemoveAll(rel); err != nil {
		return d.wrap("remove", rel, err)
	}
	return nil
}
