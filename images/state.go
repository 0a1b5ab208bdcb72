package images

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// state is what the state file holds: the active environment and the
// configuration it grew from. When the configuration changes (say ENV_TYPE
// is edited), the saved environment no longer applies.
type state struct {
	Origin      string      `json:"origin"`
	Environment Environment `json:"environment"`
	// Known is the last state of every environment used so far, by
	// identity, so switching back restores its packages.
	Known map[string]Environment `json:"known,omitempty"`
}

// identity names an environment's lineage: everything but what installs change.
func (e Environment) identity() string {
	e.Image, e.ImageID, e.Requirements, e.Depth, e.Executable = "", "", nil, 0, ""
	b, _ := json.Marshal(e) // a struct of strings and ints always marshals
	return string(b)
}

// origin fingerprints the configured starting environment.
func origin(initial Environment) string {
	b, _ := json.Marshal(initial) // a struct of strings and ints always marshals
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// loadState reads the state file; a missing file is (zero, false, nil).
func loadState(path string) (state, bool, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return state{}, false, nil
	}
	if err != nil {
		return state{}, false, fmt.Errorf("read environment state: %w", err)
	}
	var st state
	if err := json.Unmarshal(b, &st); err != nil {
		return state{}, false, fmt.Errorf("environment state %s is corrupt: %w", path, err)
	}
	return st, true, nil
}

// saveState writes the state file atomically (temp file, fsync, rename).
func saveState(path string, st state) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("encode environment state: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("environment state directory: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".environment-*.json")
	if err != nil {
		return fmt.Errorf("write environment state: %w", err)
	}
	_, werr := tmp.Write(append(b, '\n'))
	serr := tmp.Sync()
	cerr := tmp.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write environment state: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write environment state: %w", err)
	}
	return nil
}

// StateImages lists the images the state file at path refers to (the
// active environment and every remembered one); a missing file lists none.
func StateImages(path string) ([]string, error) {
	st, ok, err := loadState(path)
	if err != nil || !ok {
		return nil, err
	}
	refs := []string{st.Environment.Image}
	for _, e := range st.Known {
		refs = append(refs, e.Image)
	}
	return refs, nil
}

// LayerRepo is the repository of package-layer images (pybox-env:<key>).
const LayerRepo = layerRepo
