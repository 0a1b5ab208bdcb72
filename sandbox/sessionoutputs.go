package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// SessionOutputsMount is where a session's container sees its private
// output area: each call's $PYBOX_OUTPUTS is a fresh folder in it.
const SessionOutputsMount = "/outputs"

// sessionOutputs is a session's private output area: a host folder under
// the Sandbox's RunsDir that no container but that session's mounts (at
// SessionOutputsMount), outside its workspace. Each turn gets a fresh
// folder in it; when the turn ends, the folder is moved out of the area,
// where no container reaches it, and handed to the caller as the turn's
// Outputs, as a stateless run's private folder is. So a session's result
// lists only what its own program made, even when its workspace is the
// shared code storage (mcp-executor).
type sessionOutputs struct {
	dir     string // the mounted area
	runsDir string // where a turn's folder goes when the turn ends
}

// newSessionOutputs makes a session's area; nil (and no error) without a
// RunsDir or a backend that mounts host folders.
func (s *Sandbox) newSessionOutputs() (*sessionOutputs, error) {
	if s.runsDir == "" || !s.hostFolders() {
		return nil, nil
	}
	so := &sessionOutputs{dir: filepath.Join(s.runsDir, "s-"+newNonce()[:16]), runsDir: s.runsDir}
	if err := os.Mkdir(so.dir, 0o755); err != nil {
		return nil, fmt.Errorf("session output area: %w", err)
	}
	if err := s.chownToSandbox(so.dir); err != nil {
		so.remove()
		return nil, err
	}
	return so, nil
}

// hostFolders reports whether the backend mounts host folders (Docker,
// Podman); a pod has none.
func (s *Sandbox) hostFolders() bool {
	_, pods := s.eng.(kubernetes)
	return !pods
}

// beginTurnOutputs empties ls's area (whatever a thread of an earlier
// call left) and makes this call's folder in it; it returns the folder's
// name, "" when there is none (the call runs without).
func (s *Sandbox) beginTurnOutputs(ls *liveSession) string {
	so := ls.outputs
	if so == nil {
		return ""
	}
	// Best effort: a thread still writing may keep a folder from going;
	// what stays is counted against the quota with the workspace.
	_ = emptyDir(so.dir)
	name := runFolderName()
	dir := filepath.Join(so.dir, name)
	err := os.Mkdir(dir, 0o755)
	if err == nil {
		err = s.chownToSandbox(dir)
	}
	if err != nil {
		s.log.Warn("session output folder unavailable", "session_id", ls.id, "err", err)
		return ""
	}
	return name
}

// endTurnOutputs takes the call's folder name out of ls's area, or says
// why the call has none.
func (s *Sandbox) endTurnOutputs(ls *liveSession, name string) (*Outputs, string) {
	if ls.outputs == nil {
		return nil, ls.noOutputs
	}
	o, err := ls.outputs.end(name)
	if err != nil {
		s.log.Warn("session output folder not collected", "session_id", ls.id, "err", err)
	}
	if o == nil {
		return nil, "figures and output files were not collected: the call's output folder could not be made, or was removed or replaced"
	}
	return o, ""
}

// end moves the turn's folder name out of the area and returns it as the
// turn's Outputs; nil when the program removed it or replaced it with
// anything but a folder (then what is left is removed).
func (so *sessionOutputs) end(name string) (*Outputs, error) {
	if so == nil || name == "" {
		return nil, nil
	}
	// "t-": never the name of a stateless run's folder (nor an area's, "s-").
	o := &Outputs{Name: name, Dir: filepath.Join(so.runsDir, "t-"+name)}
	if err := os.Rename(filepath.Join(so.dir, name), o.Dir); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("take the call's output folder: %w", err)
	}
	// Out of the area, nothing in a container can swap it any more.
	if fi, err := os.Lstat(o.Dir); err != nil || !fi.IsDir() {
		return nil, errors.Join(errors.New("the call's output folder was replaced by something else"), o.Remove())
	}
	return o, nil
}

// remove deletes the area; safe on nil.
func (so *sessionOutputs) remove() error {
	if so == nil {
		return nil
	}
	return os.RemoveAll(so.dir)
}

// emptyDir removes everything in dir (without following symlinks).
func emptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		errs = append(errs, os.RemoveAll(filepath.Join(dir, e.Name())))
	}
	return errors.Join(errs...)
}
