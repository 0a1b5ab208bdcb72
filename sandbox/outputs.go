package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"syscall"
	"time"

	"github.com/pybox-dev/pybox/internal/storage"
)

// OutputsFolder is where a run's output folders appear in the workspace.
const OutputsFolder = "outputs"

// Outputs is a run's own output folder: a private host directory under
// Config.RunsDir that only that run's container mounts, at
// /workspace/outputs/<Name> (a session's call: see sessionOutputs). Whatever the caller finds in Dir was written by
// that run alone (a concurrent run sees only the empty folder the mount
// covers in the shared workspace). The caller reads it, then calls Remove.
type Outputs struct {
	Name       string // the folder's name; PYBOX_OUTPUTS in the container is Path()
	Dir        string // host path of the private directory
	mountpoint string // the covered folder in the workspace, removed if left empty
	handedOver func() // ends the account's leaving Dir out (see Account.handOver); nil = none
}

// Path is the folder as the program sees it.
func (o *Outputs) Path() string { return WorkspaceMount + "/" + OutputsFolder + "/" + o.Name }

// Remove deletes the private directory and, when empty, the folder it
// covered in the workspace. Safe on nil; idempotent.
func (o *Outputs) Remove() error {
	if o == nil {
		return nil
	}
	err := os.RemoveAll(o.Dir) // does not follow symlinks the run left
	if o.handedOver != nil {
		o.handedOver()
	}
	// Left when not empty: the caller copied the run's files there, or
	// another run (all of them share the workspace) wrote into it.
	if o.mountpoint == "" { // a session's call: nothing was mounted in the workspace
		return err
	}
	if rerr := os.Remove(o.mountpoint); rerr != nil && !errors.Is(rerr, os.ErrNotExist) && !errors.Is(rerr, syscall.ENOTEMPTY) {
		err = errors.Join(err, rerr)
	}
	return err
}

// runFolderName is a fresh name for a run's output folder: when it was
// made, and a random part.
func runFolderName() string {
	return time.Now().UTC().Format("20060102-150405") + "-" + newNonce()[:8]
}

// newOutputs makes the private directory of a run in workspace and the
// empty folder it will be mounted over; nil when the Sandbox has no RunsDir.
func (s *Sandbox) newOutputs(workspace string) (*Outputs, error) {
	if s.runsDir == "" || workspace == "" {
		return nil, nil
	}
	name := runFolderName()
	o := &Outputs{Name: name, Dir: filepath.Join(s.runsDir, name), mountpoint: filepath.Join(workspace, OutputsFolder, name)}
	if err := os.Mkdir(o.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("run output folder: %w", err)
	}
	if err := s.chownToSandbox(o.Dir); err != nil {
		o.Remove()
		return nil, err
	}
	if err := s.makeMountpoint(workspace, path.Join(OutputsFolder, name)); err != nil {
		o.Remove()
		return nil, err
	}
	return o, nil
}

// makeMountpoint creates rel inside workspace without leaving it (os.Root),
// owned by the sandbox user, so the daemon mounts over a folder that is
// ours rather than making one as root. A program may have replaced
// outputs/ with something else: then the folder is made wherever that
// leads inside the workspace, or the run gets an error.
func (s *Sandbox) makeMountpoint(workspace, rel string) error {
	root, err := os.OpenRoot(workspace)
	if err != nil {
		return fmt.Errorf("open the workspace: %w", err)
	}
	defer root.Close()
	if err := root.MkdirAll(rel, 0o755); err != nil {
		return fmt.Errorf("make %s in the workspace: %w", rel, err)
	}
	if uid, gid, ok := s.sandboxOwner(); ok {
		for _, p := range []string{path.Dir(rel), rel} {
			if err := root.Lchown(p, uid, gid); err != nil {
				return fmt.Errorf("give %s to the sandbox user: %w", p, err)
			}
			if err := s.shareDir(func(m os.FileMode) error { return root.Chmod(p, m) }); err != nil {
				return fmt.Errorf("share %s with the sandbox group: %w", p, err)
			}
		}
	}
	return nil
}

// chownToSandbox gives a directory pybox made to the sandbox user when the
// server runs as root (otherwise the sandbox user is the server's own).
func (s *Sandbox) chownToSandbox(dir string) error {
	uid, gid, ok := s.sandboxOwner()
	if !ok {
		return nil
	}
	if err := os.Lchown(dir, uid, gid); err != nil {
		return fmt.Errorf("give %s to the sandbox user: %w", dir, err)
	}
	if err := s.shareDir(func(m os.FileMode) error { return os.Chmod(dir, m) }); err != nil {
		return fmt.Errorf("share %s with the sandbox group: %w", dir, err)
	}
	return nil
}

// shareDir makes a directory pybox made group-writable and setgid with
// chmod, when containers run as uids of their own in the sandbox user's
// group (Config.SharedUID).
func (s *Sandbox) shareDir(chmod func(os.FileMode) error) error {
	if !s.ownUIDs {
		return nil
	}
	return chmod(storage.SharedDirMode)
}

// sandboxOwner is the uid and gid programs run as, when pybox runs as root
// and so must hand them what they write to.
func (s *Sandbox) sandboxOwner() (uid, gid int, ok bool) {
	if os.Geteuid() != 0 {
		return 0, 0, false
	}
	if _, err := fmt.Sscanf(s.cfg.User, "%d:%d", &uid, &gid); err != nil {
		return 0, 0, false
	}
	return uid, gid, true
}
