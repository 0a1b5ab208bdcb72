package lease

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// suffix ends every lease file's name: <id>.lock.
const suffix = ".lock"

// maxCreates bounds how often Acquire creates its file again after a
// reaper removed it before it was locked (each time needs a reaper that
// saw the fresh file, so a second time is already unlikely).
const maxCreates = 8

// Dir is a folder of lease files. Create it with Open.
type Dir struct {
	root *os.Root
	path string // absolute, symlinks resolved
	// afterCreate, when set (tests only), runs between Acquire's create
	// and lock: where a reaper can take the fresh file.
	afterCreate func(id string)
}

// Open opens the lease folder at path, creating it (0700) when missing.
func Open(path string) (*Dir, error) {
	if err := os.MkdirAll(path, 0o700); err != nil {
		return nil, fmt.Errorf("lease folder: %w", err)
	}
	abs, err := filepath.Abs(path)
	if err == nil {
		abs, err = filepath.EvalSymlinks(abs)
	}
	if err != nil {
		return nil, fmt.Errorf("lease folder: %w", err)
	}
	root, err := os.OpenRoot(abs)
	if err != nil {
		return nil, fmt.Errorf("lease folder: %w", err)
	}
	return &Dir{root: root, path: abs}, nil
}

// Close closes the folder; Leases taken from it must be done first.
func (d *Dir) Close() error { return d.root.Close() }

// Path is the folder's absolute path, symlinks resolved.
func (d *Dir) Path() string { return d.path }

// File is the absolute path of owner id's lease file.
func (d *Dir) File(id string) string { return filepath.Join(d.path, fileName(id)) }

func fileName(id string) string { return id + suffix }

// IDs lists the owners that have a lease file in the folder.
func (d *Dir) IDs() ([]string, error) {
	entries, err := fs.ReadDir(d.root.FS(), ".")
	if err != nil {
		return nil, fmt.Errorf("lease folder: %w", err)
	}
	var ids []string
	for _, e := range entries {
		if id, ok := strings.CutSuffix(e.Name(), suffix); ok && ValidID(id) {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// Acquire creates the lease file of the new owner id and locks it, waiting
// for a reaper that may hold it for a moment. An existing file of that id
// is an error wrapping fs.ErrExist (ids are random: someone planted it).
func (d *Dir) Acquire(id string) (*Lease, error) {
	if !ValidID(id) {
		return nil, fmt.Errorf("lease: invalid owner id %q", id)
	}
	for range maxCreates {
		f, err := d.root.OpenFile(fileName(id), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return nil, fmt.Errorf("create lease %s: %w", id, err)
		}
		if d.afterCreate != nil {
			d.afterCreate(id)
		}
		l, err := d.lock(f, id, true)
		if !errors.Is(err, fs.ErrNotExist) {
			return l, err
		}
		// A reaper took the fresh, not yet locked file for a gone owner's
		// and removed it: create it again.
	}
	return nil, fmt.Errorf("create lease %s: removed %d times before it could be locked", id, maxCreates)
}

// TryTake takes owner id's lease without waiting: the owner is certainly
// gone. It fails with ErrHeld when a live process holds the lease, and with
// an error wrapping fs.ErrNotExist when the folder has no such lease file
// (never made here, or already cleaned up).
func (d *Dir) TryTake(id string) (*Lease, error) {
	if !ValidID(id) {
		return nil, fmt.Errorf("lease %q: %w", id, fs.ErrNotExist)
	}
	info, err := d.root.Lstat(fileName(id))
	if err != nil {
		return nil, fmt.Errorf("lease %s: %w", id, err)
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("lease %s is not a regular file (%v)", id, info.Mode().Type())
	}
	// Read-only (flock needs no more); non-blocking in case the name was
	// swapped for a FIFO since Lstat (lock then sees it is not the file).
	f, err := d.root.OpenFile(fileName(id), os.O_RDONLY|oNonblock, 0)
	if err != nil {
		return nil, fmt.Errorf("lease %s: %w", id, err)
	}
	return d.lock(f, id, false)
}

// lock locks f exclusively (waiting for it with wait, else failing with
// ErrHeld), then checks that id's path still names f. On failure it
// closes f; a path that no longer names f fails with fs.ErrNotExist.
func (d *Dir) lock(f *os.File, id string, wait bool) (*Lease, error) {
	if err := lockFile(f, wait); err != nil {
		f.Close()
		if errors.Is(err, ErrHeld) {
			return nil, fmt.Errorf("lease %s: %w", id, err)
		}
		return nil, fmt.Errorf("lock lease %s: %w", id, err)
	}
	info, err := d.root.Lstat(fileName(id))
	if err != nil || !sameFile(f, info) {
		f.Close()
		return nil, fmt.Errorf("lease %s was removed or replaced: %w", id, fs.ErrNotExist)
	}
	return &Lease{dir: d, id: id, f: f}, nil
}
