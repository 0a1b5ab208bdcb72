package storage

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"
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
	p, err := d.place(rel, false)
	if err != nil {
		return 0, err
	}
	defer p.close()
	old, fi, err := d.readForAppend(p, int64(len(content)), maxTotal)
	if err != nil {
		return 0, err
	}
	data := append(old, content...)
	if err := d.replace(p, data, fi); err != nil {
		return 0, err
	}
	return int64(len(data)), nil
}

// readForAppend reads all of rel, failing with ErrTooLarge when it plus
// add more bytes would exceed maxTotal. The limit applies to what is read,
// not only to the size seen by stat, since sandboxed code may grow the file
// meanwhile.
func (d *Dir) readForAppend(p *place, add, maxTotal int64) ([]byte, fs.FileInfo, error) {
	rel := p.rel
	f, fi, err := d.openRegularIn(p)
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

// replace atomically replaces p's file with data through a temp file in
// the same folder that carries old's permission bits (and owner, as root).
func (d *Dir) replace(p *place, data []byte, old fs.FileInfo) error {
	tmp := tempPrefix + randomHex(6)
	f, err := p.dir.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|oNoFollow, 0o600)
	if err != nil {
		return d.wrap("append", p.rel, err)
	}
	err = writeTemp(f, data, old)
	if err == nil {
		err = p.dir.Rename(tmp, p.name)
	}
	if err != nil {
		_ = p.dir.Remove(tmp) // in the same folder: it goes
		return d.wrap("append", p.rel, err)
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
