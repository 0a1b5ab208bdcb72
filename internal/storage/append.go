package storage

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// appendMutex serializes Dir.Append calls (the Dir's appendMu field), so two
// concurrent appends to one file cannot both read the old content and lose
// one another's data. An alias keeps the field's type sync.Mutex.
type appendMutex = sync.Mutex

// Append adds content to the end of the existing regular file rel and
// returns the file's new size. A missing file is ErrNotFound; a symlink,
// directory, FIFO, socket or device is ErrNotFile (never opened for a
// blocking read); a result larger than maxTotal bytes is ErrTooLarge. The
// file is rewritten atomically (temp file + rename) with its permission
// bits kept (set-id and sticky bits dropped) and, when the server runs as
// root, its owner kept, so the sandbox user can still edit it.
func (d *Dir) Append(rel string, content []byte, maxTotal int64) (int64, error) {
	d.appendMu.Lock()
	defer d.appendMu.Unlock()
	old, fi, err := d.readForAppend(rel, int64(len(content)), maxTotal)
	if err != nil {
		return 0, err
	}
	data := append(old, content...)
	if err := d.replace(rel, data, fi); err != nil {
		return 0, err
	}
	return int64(len(data)), nil
}

// readForAppend reads all of rel, failing with ErrTooLarge when it plus
// add more bytes would exceed maxTotal. The limit applies to what is read,
// not only to the size seen by stat, since sandboxed code may grow the file
// meanwhile.
func (d *Dir) readForAppend(rel string, add, maxTotal int64) ([]byte, fs.FileInfo, error) {
	f, fi, err := d.openRegular(rel)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	room := maxTotal - add
	if room < 0 || fi.Size() > room {
		return nil, nil, tooLarge(rel, fi.Size(), add, maxTotal)
	}
	data, err := io.ReadAll(io.LimitReader(f, room+1))
	if err != nil {
		return nil, nil, d.wrap("read", rel, err)
	}
	if int64(len(data)) > room {
		return nil, nil, tooLarge(rel, int64(len(data)), add, maxTotal)
	}
	return data, fi, nil
}

func tooLarge(rel string, size, add, maxTotal int64) error {
	return fmt.Errorf("append to %s: %d bytes plus %d would exceed the limit of %d bytes: %w", rel, size, add, maxTotal, ErrTooLarge)
}

// replace atomically replaces rel with data through a temp file in the
// same directory that carries old's permission bits (and owner, as root).
func (d *Dir) replace(rel string, data []byte, old fs.FileInfo) error {
	tmp := filepath.Join(filepath.Dir(rel), ".pybox-tmp-"+randomHex(6))
	f, err := d.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return d.wrap("append", rel, err)
	}
	err = writeTemp(f, data, old)
	if err == nil {
		err = d.root.Rename(tmp, rel)
	}
	if err != nil {
		_ = d.root.Remove(tmp) // best effort: the temp file is ours and useless now
		return d.wrap("append", rel, err)
	}
	return nil
}

// writeTemp fills and closes the temp file, giving it old's owner (only
// possible as root) and then old's permission bits.
func writeTemp(f *os.File, data []byte, old fs.FileInfo) error {
	var owner error
	if uid, gid, ok := ownerOf(old); ok && os.Geteuid() == 0 {
		owner = f.Chown(uid, gid)
	}
	_, werr := f.Write(data)
	return errors.Join(owner, f.Chmod(old.Mode().Perm()), werr, f.Sync(), f.Close())
}

// ownerOf returns the uid and gid recorded in fi, when the platform has them.
func ownerOf(fi fs.FileInfo) (uid, gid int, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return int(st.Uid), int(st.Gid), true
}
