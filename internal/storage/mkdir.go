package storage

import (
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
)

// mkdirAll creates the directory rel and any missing parents inside the
// root, giving each directory it creates (and only those) the owner set by
// SetOwner, as Sub does, so the sandbox user can write in them.
func (d *Dir) mkdirAll(rel string) error {
	parts := strings.Split(filepath.Clean(rel), string(filepath.Separator))
	for i := range parts {
		p := filepath.Join(parts[:i+1]...)
		err := d.root.Mkdir(p, 0o755)
		if errors.Is(err, fs.ErrExist) {
			continue // an existing entry; os.Root resolves it (inside the root only) below
		}
		if err != nil {
			return err
		}
		if d.owner != nil {
			if err := d.root.Lchown(p, d.owner[0], d.owner[1]); err != nil {
				return err
			}
		}
		if d.shared {
			if err := d.root.Chmod(p, SharedDirMode); err != nil {
				return err
			}
		}
	}
	return nil
}
