package images

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// maxStagedWheelhouse bounds the copy of a wheelhouse the install user
// cannot read.
const maxStagedWheelhouse = 2 << 30

// staging is what one install mounts: the wheelhouse (the operator's
// folder, or a copy the install user can read) and the download step's
// files, in a private folder removed after the install. No container
// writes there: pybox fills it, and installs mount it read-only.
type staging struct {
	dir        string
	wheelhouse string // mounted at wheelhouseMount ("" = no wheelhouse)
	downloads  string // mounted at downloadsMount ("" = nothing downloaded)
}

// stage makes the install's private folder and, when the install user
// (uid 10002, not the operator) could not read the wheelhouse, a copy of
// it that it can.
func (in *Installer) stage() (*staging, error) {
	mkdir := in.TempDir
	if mkdir == nil {
		mkdir = func(pattern string) (string, error) { return os.MkdirTemp("", pattern) }
	}
	dir, err := mkdir("pybox-install-")
	if err != nil {
		return nil, fmt.Errorf("install staging folder: %w", err)
	}
	s := &staging{dir: dir}
	if s.dir, err = filepath.EvalSymlinks(dir); err != nil { // bind sources must be their own real paths
		s.remove()
		return nil, fmt.Errorf("install staging folder: %w", err)
	}
	if err := os.Chmod(s.dir, 0o755); err != nil {
		s.remove()
		return nil, fmt.Errorf("install staging folder: %w", err)
	}
	if wh := in.Index.Wheelhouse; wh != "" {
		if err := s.stageWheelhouse(wh); err != nil {
			s.remove()
			return nil, err
		}
	}
	return s, nil
}

func (s *staging) remove() { os.RemoveAll(s.dir) }

// subdir makes a folder readable by all in the staging folder.
func (s *staging) subdir(name string) (string, error) {
	p := filepath.Join(s.dir, name)
	if err := os.Mkdir(p, 0o755); err != nil {
		return "", fmt.Errorf("install staging folder: %w", err)
	}
	return p, os.Chmod(p, 0o755)
}

// stageWheelhouse mounts wh itself when everyone may read it and its
// wheels, else a copy of its files (symlinks followed, as pip would).
func (s *staging) stageWheelhouse(wh string) error {
	if err := wheelhouseOK(wh); err != nil {
		return err
	}
	entries, err := readableByAll(wh)
	if err != nil {
		return err
	}
	if entries == nil {
		s.wheelhouse = wh
		return nil
	}
	if s.wheelhouse, err = s.subdir("wheelhouse"); err != nil {
		return err
	}
	var total int64
	for _, e := range entries {
		if total += e.size; total > maxStagedWheelhouse {
			return fmt.Errorf("the wheelhouse %s is not readable by the install user (uid %s) and holds more than %d MiB to copy: "+
				"make it readable by all (chmod o+rx on the folder, o+r on its files)", wh, InstallUser, maxStagedWheelhouse>>20)
		}
		f, err := os.Open(filepath.Join(wh, e.name))
		if err != nil {
			return fmt.Errorf("wheelhouse: %w", err)
		}
		err = writeFile(filepath.Join(s.wheelhouse, e.name), f)
		f.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// wheelFile is a regular file at the top of a wheelhouse.
type wheelFile struct {
	name string
	size int64
}

// readableByAll returns nil when others may list dir and read every
// regular file at its top (all pip's --find-links reads), else those files.
func readableByAll(dir string) ([]wheelFile, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("wheelhouse: %w", err)
	}
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("wheelhouse: %w", err)
	}
	readable := fi.Mode().Perm()&0o005 == 0o005
	var files []wheelFile
	for _, de := range des {
		info, err := os.Stat(filepath.Join(dir, de.Name()))
		if err != nil || !info.Mode().IsRegular() {
			continue // dangling links, folders: pip does not use them either
		}
		readable = readable && info.Mode().Perm()&0o004 != 0 && de.Type()&fs.ModeSymlink == 0
		files = append(files, wheelFile{de.Name(), info.Size()})
	}
	if readable {
		return nil, nil
	}
	if files == nil {
		files = []wheelFile{}
	}
	return files, nil
}
