package app

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestNotNested: a pybox started as another's downstream server (which
// tells it its folders) is refused when its code storage or state dir
// would share one of the parent's, as its defaults would (the parent's
// tenants' folders are inside its base storage), and accepted with its
// own folders.
func TestNotNested(t *testing.T) {
	base := t.TempDir()
	parent := &Config{StorageDir: filepath.Join(base, "code", "tenants", "a"), StateDir: filepath.Join(base, "state", "tenants", "a")}
	marker := parent.ParentDirs()[ParentDirsVar]
	for _, tc := range []struct {
		name           string
		storage, state string
		refused        string
	}{
		{"the defaults: the parent's base folders", filepath.Join(base, "code"), filepath.Join(base, "state"), "CODE_STORAGE_DIR"},
		{"the parent's own storage", parent.StorageDir, filepath.Join(base, "other-state"), "CODE_STORAGE_DIR"},
		{"a state dir inside the parent's", filepath.Join(base, "other-code"), filepath.Join(parent.StateDir, "child"), "PYBOX_STATE_DIR"},
		{"its own folders", filepath.Join(base, "child", "code"), filepath.Join(base, "child", "state"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := (&Config{StorageDir: tc.storage, StateDir: tc.state}).notNested(marker)
			switch {
			case tc.refused == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.refused != "" && (err == nil || !strings.Contains(err.Error(), "its "+tc.refused)):
				t.Errorf("error %v; want its %s refused", err, tc.refused)
			}
		})
	}
	if err := (&Config{StorageDir: parent.StorageDir, StateDir: parent.StateDir}).notNested(""); err != nil {
		t.Errorf("a pybox started by no pybox: %v", err)
	}
}
