package storage

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Entry is one directory entry as List reports it.
type Entry struct {
	Name string
	Kind string // "file", "dir", "symlink" or "other" (FIFO, socket, device)
	Size int64  // bytes, for files only
}

// tempPrefix starts the names of the temp files of atomic writes.
const tempPrefix = ".pybox-tmp-"

// listBatch is how many names List reads from the directory at a time.
const listBatch = 256

// List returns the entries of directory rel sorted by name, at most limit
// of them, and whether there were more. Symlinks are reported, never followed:
// rel itself must be a real directory (a symlink to one is ErrNotFile).
// Temp files of atomic writes are left out.
func (d *Dir) List(rel string, limit int) ([]Entry, bool, error) {
	f, err := d.openDir(rel)
	if err != nil {
		return nil, false, err
	}
	names, more, err := firstNames(f, limit)
	f.Close()
	if err != nil {
		return nil, false, d.wrap("list", rel, err)
	}
	entries := make([]Entry, 0, len(names))
	for _, name := range names {
		e, err := d.entry(rel, name)
		if err != nil {
			return nil, false, err
		}
		if e != nil {
			entries = append(entries, *e)
		}
	}
	return entries, more, nil
}

// openDir opens rel for listing, refusing anything but a real directory.
// The check is repeated on the handle, and the open never blocks, so a
// FIFO swapped in after the Lstat cannot hang the server.
func (d *Dir) openDir(rel string) (*os.File, error) {
	if err := d.refuseNonDir(rel); err != nil {
		return nil, err
	}
	f, err := d.root.OpenFile(rel, os.O_RDONLY|oNonblock|oDirectory, 0)
	if err != nil {
		return nil, d.wrap("open directory", rel, err)
	}
	if fi, err := f.Stat(); err != nil || !fi.IsDir() {
		f.Close()
		return nil, fmt.Errorf("%s: %w", rel, ErrNotFile)
	}
	return f, nil
}

// firstNames reads the names in f, skipping temp files, and returns the
// limit smallest in order and whether there were more. Memory stays bounded
// however many entries the directory holds.
func firstNames(f *os.File, limit int) ([]string, bool, error) {
	limit = max(limit, 0)
	var keep []string
	more := false
	for {
		batch, err := f.Readdirnames(listBatch)
		for _, n := range batch {
			if !strings.HasPrefix(n, tempPrefix) {
				keep = append(keep, n)
			}
		}
		if err != nil && err != io.EOF {
			return nil, false, err
		}
		if done := err == io.EOF; done || len(keep) > 2*limit {
			slices.Sort(keep)
			if len(keep) > limit {
				keep, more = keep[:limit], true
			}
			if done {
				return keep, more, nil
			}
		}
	}
}

// entry describes name in dir without following it; nil when it vanished
// since the directory was read.
func (d *Dir) entry(dir, name string) (*Entry, error) {
	rel := filepath.Join(dir, name)
	fi, err := d.root.Lstat(rel)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, d.wrap("stat", rel, err)
	}
	e := &Entry{Name: name, Kind: entryKind(fi.Mode())}
	if e.Kind == "file" {
		e.Size = fi.Size()
	}
	return e, nil
}

func entryKind(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "file"
	case m.IsDir():
		return "dir"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	}
	return "other"
}
