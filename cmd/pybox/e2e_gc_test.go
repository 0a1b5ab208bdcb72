package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/pybox-dev/pybox/internal/testenv"
)

// TestGCKeepsSavedEnvironments: gc would remove a layer no saved
// environment uses and keeps the active one's. (Dry run: other test
// packages may be using layers on this daemon right now.)
func TestGCKeepsSavedEnvironments(t *testing.T) {
	wh := testenv.Wheelhouse(t)
	state := t.TempDir()
	kept := packageServer(t, wh, "PYBOX_STATE_DIR="+state).install("pyboxother").Image
	dropped := packageServer(t, wh).install("pyboxbase==1.0").Image
	cmd := exec.Command(pyboxBin, "gc", "--dry-run", "--state-dir", state)
	cmd.Env = append(os.Environ(), "PYBOX_BUILD=never")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("pybox gc: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), dropped) || strings.Contains(string(out), kept) {
		t.Errorf("gc --dry-run output:\n%s\nwant %s listed for removal and %s kept", out, dropped, kept)
	}
}
