//go:build !windows

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

// TestGCKeepsTenantsEnvironments: over HTTP each tenant saves its own
// environment (PYBOX_STATE_DIR/tenants/NAME); gc keeps the layers those
// use too.
func TestGCKeepsTenantsEnvironments(t *testing.T) {
	wh := testenv.Wheelhouse(t)
	dropTestLayers(t)
	h := startHTTP(t, false, "PYBOX_WHEELHOUSE="+wh, "PYBOX_INSTALL_NETWORK=none")
	a := h.connect(tokenA)
	if res, out := callOK(t, a, "install_dependencies", map[string]any{"packages": []string{"pyboxother"}}); res.IsError {
		t.Fatalf("tenant a's install: %s", out)
	}
	kept := httpEnv(t, a).Image
	cmd := exec.Command(pyboxBin, "gc", "--dry-run", "--state-dir", h.state)
	cmd.Env = append(os.Environ(), "PYBOX_BUILD=never")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("pybox gc: %v\n%s", err, out)
	}
	if strings.Contains(string(out), kept) {
		t.Errorf("gc --dry-run would remove tenant a's active layer %s:\n%s", kept, out)
	}
}
