package lease

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// ErrHeld: a live process holds the lease.
var ErrHeld = errors.New("the lease is held by a live owner")

// idBytes is the size of an owner id: 16 random bytes never collide.
const idBytes = 16

// NewID returns a fresh random owner id (32 lowercase hex digits).
func NewID() string {
	b := make([]byte, idBytes)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on Linux (documented)
	return hex.EncodeToString(b)
}

// ValidID reports whether id has the form NewID makes, so it names a file
// in the folder and nothing else.
func ValidID(id string) bool {
	if len(id) != 2*idBytes {
		return false
	}
	for _, c := range id {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// Lease is a held lock on one owner's lease file.
type Lease struct {
	dir *Dir
	id  string
	f   *os.File // the lock lives as long as this open file
}

// ID is the owner id.
func (l *Lease) ID() string { return l.id }

// Path is the lease file's absolute path.
func (l *Lease) Path() string { return l.dir.File(l.id) }

// Remove deletes the lease file, then drops the lock: the owner is gone
// and nothing of it is left to clean up.
func (l *Lease) Remove() error {
	err := l.dir.root.Remove(fileName(l.id))
	if err != nil {
		err = fmt.Errorf("remove lease %s: %w", l.id, err)
	}
	return errors.Join(err, l.Release())
}

// Release drops the lock and keeps the file, so a later reaper finds the
// owner gone and cleans up after it.
func (l *Lease) Release() error {
	if err := l.f.Close(); err != nil {
		return fmt.Errorf("release lease %s: %w", l.id, err)
	}
	return nil
}

// sameFile reports whether info describes the regular file f.
func sameFile(f *os.File, info fs.FileInfo) bool {
	held, err := f.Stat()
	return err == nil && info.Mode().IsRegular() && os.SameFile(held, info) && !deletePending(f)
}
