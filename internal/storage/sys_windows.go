package storage

import (
	"io/fs"
	"os"
	"path/filepath"
)

// Open flags: Windows has none of them. os.Root confines every open to the
// root there too (it resolves each path element itself and opens reparse
// points without following them), and the handle is checked after the
// open (a regular file, a directory), so the guarantees hold; a pipe
// cannot be created in a folder on Windows, so nothing blocks.
const (
	oNoFollow  = 0
	oDirectory = 0
	oNonblock  = 0
)

// lstat describes the entry without following it, through the root (on
// Windows there is no stat relative to an open directory handle).
func (e *entry) lstat() (fileStat, error) {
	fi, err := e.root.Lstat(filepath.Join(e.dir, e.name))
	if err != nil {
		return fileStat{}, err
	}
	return fileStat{size: fi.Size(), alloc: fi.Size(), regular: fi.Mode().IsRegular()}, nil
}

// ownerOf: Windows files have no uid and gid.
func ownerOf(fs.FileInfo) (uid, gid int, ok bool) { return 0, 0, false }

// searchable: Windows folders have no Unix search permission to repair.
func searchable(*os.File) {}
