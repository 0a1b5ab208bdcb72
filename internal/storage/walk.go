package storage

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// walkBatch is how many entries are read from a directory at a time.
const walkBatch = 256

// visitFunc sees one entry; it returns false to end the walk. The entry is
// only valid during the call.
type visitFunc func(e *entry) bool

// entry is one directory entry the walk found.
type entry struct {
	dir, name string // the directory (relative to the root) and the entry's name
	typ       fs.FileMode
	raw       syscall.RawConn // the open directory
	root      *os.Root
	failed    error // set by stat when permission was denied
	prune     bool  // set by the visitor: do not descend into this folder
}

// stat describes the entry without following it, against the open
// directory, so a path swapped meanwhile cannot redirect it.
func (e *entry) stat() (fileStat, error) {
	st, err := e.lstat()
	if err != nil && denied(err) {
		e.failed = fmt.Errorf("stat %s: %w", e.name, err)
	}
	return st, err
}

// fileStat is what the walk needs of an entry.
type fileStat struct {
	size    int64
	alloc   int64 // bytes allocated on disk
	regular bool
}

// walk visits the tree under root, directory by directory, reading each in
// batches so that memory stays bounded however many entries one holds.
// Symlinks are reported, never followed; a directory that vanished or was
// replaced by something else since it was seen is skipped. Every open goes
// through root, so nothing outside it is ever read. A directory the server
// may not read or search is made so when the server owns it (a program
// running as the server's own user made it 0300); otherwise the walk goes
// on without it and returns an error wrapping ErrUnreadable that names it.
func walk(root *os.Root, visit visitFunc) error {
	var unreadable error
	pending := []string{"."}
	for len(pending) > 0 {
		dir := pending[len(pending)-1]
		pending = pending[:len(pending)-1]
		more, ok, err := walkDir(root, dir, visit)
		if err != nil && unreadable == nil {
			unreadable = fmt.Errorf("%w: %s", ErrUnreadable, filepath.ToSlash(dir))
		}
		if !ok {
			break
		}
		pending = append(pending, more...)
	}
	return unreadable
}

// ErrUnreadable: the server could not read a folder of the tree, so what
// the tree holds is not known. Callers that bound a tree's size must treat
// it as over its bound.
var ErrUnreadable = errors.New("a folder the server cannot read")

// walkDir visits the entries of dir and returns its subdirectories; ok is
// false when visit ended the walk; err is set when dir could not be read
// (or searched) for want of permission.
func walkDir(root *os.Root, dir string, visit visitFunc) (subdirs []string, ok bool, err error) {
	f, err := openDir(root, dir)
	if err != nil {
		if denied(err) {
			return nil, true, err
		}
		return nil, true, nil // gone, or swapped for a symlink: nothing of it is counted
	}
	defer f.Close()
	raw, err := f.SyscallConn()
	if err != nil {
		return nil, true, nil
	}
	e := &entry{dir: dir, raw: raw, root: root}
	for {
		batch, rerr := f.ReadDir(walkBatch)
		for _, de := range batch {
			e.name, e.typ, e.prune = de.Name(), de.Type(), false
			if !visit(e) {
				return nil, false, err
			}
			if e.failed != nil && err == nil {
				err = e.failed
			}
			if de.IsDir() && !e.prune {
				subdirs = append(subdirs, filepath.Join(dir, e.name))
			}
		}
		if rerr != nil { // io.EOF, or a directory that cannot be read further
			if denied(rerr) && err == nil {
				err = rerr
			}
			return subdirs, true, err
		}
	}
}

// denied reports a failure for want of permission.
func denied(err error) bool {
	return errors.Is(err, fs.ErrPermission)
}

// Usage is what a tree holds.
type Usage struct {
	Bytes int64 // regular files: for each, the larger of its size and the disk space it takes
	Files int64 // entries of every kind (files, folders, links, others), the top folder excluded
}

// Add is u and v together.
func (u Usage) Add(v Usage) Usage { return Usage{Bytes: u.Bytes + v.Bytes, Files: u.Files + v.Files} }

// Over reports whether u exceeds limit in bytes or entries (a zero field of
// limit is no limit).
func (u Usage) Over(limit Usage) bool {
	return (limit.Bytes > 0 && u.Bytes > limit.Bytes) || (limit.Files > 0 && u.Files > limit.Files)
}

// Measure adds up the tree under path (not following symlinks), stopping
// as soon as the total exceeds stop (then the result is a lower bound and
// Over(stop) is true). It reads directories in batches, so its memory
// stays bounded. A missing path measures zero. A folder the server cannot
// read (see walk) makes the result a lower bound, with an error wrapping
// ErrUnreadable.
func Measure(path string, stop Usage) (Usage, error) {
	return MeasureExcept(path, stop, nil)
}

// MeasureExcept is Measure, counting the folders skip names (relative to
// path, slash-separated) as entries but not what they hold: another
// folder mounted there that is counted on its own.
func MeasureExcept(path string, stop Usage, skip map[string]bool) (Usage, error) {
	root, err := os.OpenRoot(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Usage{}, nil
	}
	if err != nil {
		return Usage{}, err
	}
	defer root.Close()
	var u Usage
	err = walk(root, func(e *entry) bool {
		u.Files++
		if e.typ.IsDir() && len(skip) > 0 {
			e.prune = skip[filepath.ToSlash(filepath.Join(e.dir, e.name))]
		}
		if e.typ.IsRegular() {
			if st, err := e.stat(); err == nil {
				u.Bytes += max(st.size, st.alloc)
			}
		}
		return !u.Over(stop)
	})
	return u, err
}

// File is a regular file Files found.
type File struct {
	Path  string // relative to the Dir, slash-separated
	Bytes int64
}

// Files returns up to limit regular files of the tree (not following
// symlinks; temp files of atomic writes left out), sorted by path, after
// looking at no more than maxEntries entries; more is true when it
// stopped at either cap. Directories are read in batches, so neither time
// nor memory depends on how many entries a program left.
func (d *Dir) Files(limit, maxEntries int) (files []File, more bool) {
	seen := 0
	_ = walk(d.root, func(e *entry) bool { // what cannot be read is not listed
		if seen++; seen > maxEntries || len(files) > limit {
			more = true
			return false
		}
		if !e.typ.IsRegular() || strings.HasPrefix(e.name, tempPrefix) {
			return true
		}
		if st, err := e.stat(); err == nil && st.regular {
			files = append(files, File{Path: filepath.ToSlash(filepath.Join(e.dir, e.name)), Bytes: st.size})
		}
		return true
	})
	if len(files) > limit {
		files, more = files[:limit], true
	}
	slices.SortFunc(files, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	return files, more
}
