package storage

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// SharedDirMode is the mode of the directories of a shared Dir: the
// group may write, and new entries inherit the group (setgid).
const SharedDirMode = os.ModeSetgid | 0o775

// Share makes d a folder that programs running as uids of their own, all
// in group gid, share (see sandbox.Config.SharedUID): the root becomes
// uid:gid with SharedDirMode, as does each directory Sub creates; each file
// written is uid:gid 0664 (the runner's umask is 002, so what programs
// write is group-writable too). Entries of uid that an earlier version
// left writable by their owner only get the group's write bit, so later
// programs can still write them (once: a root with SharedDirMode was
// shared already). Only as root.
func (d *Dir) Share(uid, gid int) error {
	if err := os.Lchown(d.path, uid, gid); err != nil {
		return fmt.Errorf("give the code storage to uid %d: %w", uid, err)
	}
	d.owner, d.shared = &[2]int{uid, gid}, true
	fi, err := os.Lstat(d.path)
	if err != nil {
		return fmt.Errorf("code storage: %w", err)
	}
	if fi.Mode().Perm()|fi.Mode()&os.ModeSetgid == SharedDirMode {
		return nil // shared already (programs cannot change the root's mode: it is not theirs)
	}
	if err := d.shareOld(uid); err != nil {
		return err
	}
	if err := os.Chmod(d.path, SharedDirMode); err != nil { // last: a Share cut short walks again
		return fmt.Errorf("share the code storage with group %d: %w", gid, err)
	}
	return nil
}

// shareOld gives the group write access to the entries of uid under the
// root that have only their owner's (never following a symlink).
func (d *Dir) shareOld(uid int) error {
	return fs.WalkDir(d.root.FS(), ".", func(p string, e fs.DirEntry, err error) error {
		if err != nil || p == "." {
			return nil // an entry that went, or one the walk cannot read: left as it is
		}
		fi, err := e.Info()
		if err != nil {
			return nil // gone meanwhile
		}
		if owner, _, ok := ownerOf(fi); !ok || owner != uid {
			return nil
		}
		want := fi.Mode()
		switch {
		case fi.IsDir():
			want = want.Perm() | SharedDirMode
		case fi.Mode().IsRegular() && fi.Mode().Perm()&0o200 != 0:
			want = fi.Mode() | 0o060
		}
		if want == fi.Mode() {
			return nil
		}
		if err := d.root.Chmod(p, want); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return d.wrap("share", p, err)
		}
		return nil
	})
}

// fileMode is the mode of the files d writes.
func (d *Dir) fileMode() os.FileMode {
	if d.shared {
		return 0o664
	}
	return 0o644
}
