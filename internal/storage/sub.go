package storage

import (
	"fmt"
	"os"
)

// SetOwner makes uid:gid the owner of the root and of every directory Sub
// creates (used when the server runs as root and programs run as an
// unprivileged user that must be able to write there).
func (d *Dir) SetOwner(uid, gid int) error {
	if err := os.Chown(d.path, uid, gid); err != nil {
		return fmt.Errorf("give the code storage to uid %d: %w", uid, err)
	}
	d.owner = &[2]int{uid, gid}
	return nil
}

// SetNewOwner makes uid:gid the owner of the directories Sub and writes
// create, leaving the root's own owner alone.
func (d *Dir) SetNewOwner(uid, gid int) { d.owner = &[2]int{uid, gid} }

// Reopen opens d's directory again as a Dir of its own (same owner
// settings), for a caller that will close it.
func (d *Dir) Reopen() (*Dir, error) {
	root, err := os.OpenRoot(d.path)
	if err != nil {
		return nil, fmt.Errorf("open code storage: %w", err)
	}
	return &Dir{path: d.path, root: root, owner: d.owner, shared: d.shared}, nil
}

// Sub creates (if needed) the directory rel inside d, including parents
// (new ones get d's owner), and opens it as a Dir of its own.
func (d *Dir) Sub(rel string) (*Dir, error) {
	rel, err := d.Rel(rel)
	if err != nil {
		return nil, err
	}
	if err := d.mkdirAll(rel); err != nil {
		return nil, d.wrap("create directory", rel, err)
	}
	return d.openSub(rel)
}

// OpenSub opens the existing directory rel inside d as a Dir of its own
// (ErrNotFound when it is absent: nothing is created).
func (d *Dir) OpenSub(rel string) (*Dir, error) {
	rel, err := d.Rel(rel)
	if err != nil {
		return nil, err
	}
	return d.openSub(rel)
}

func (d *Dir) openSub(rel string) (*Dir, error) {
	if err := d.refuseNonDir(rel); err != nil {
		return nil, err
	}
	root, err := d.root.OpenRoot(rel)
	if err != nil {
		return nil, d.wrap("open directory", rel, err)
	}
	return &Dir{path: d.Abs(rel), root: root, owner: d.owner, shared: d.shared}, nil
}

// refuseNonDir fails unless rel is a real directory (not a symlink to one).
func (d *Dir) refuseNonDir(rel string) error {
	fi, err := d.root.Lstat(rel)
	if err != nil {
		return d.wrap("stat", rel, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s: %w (%s)", rel, ErrNotFile, kind(fi.Mode()))
	}
	return nil
}
