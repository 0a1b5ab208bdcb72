//go:build linux

package app

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pybox-dev/pybox/internal/quotafs"
	"github.com/pybox-dev/pybox/sandbox"
)

// The quota mode in force, and the fallback: meter when asked; auto falls
// back to the meter (saying why) where the folders hold files from
// before; filesystem then refuses to start, with the reason; auto and
// filesystem mount an image where they can.
func TestQuotaModeSelection(t *testing.T) {
	limits := sandbox.Limits{WorkspaceBytes: 8 << 20, WorkspaceFiles: 500}
	start := func(t *testing.T, mode string, occupied bool) (*quotafs.Volume, error, string) {
		root := t.TempDir()
		c := &Config{QuotaMode: mode, StorageDir: filepath.Join(root, "code"), StateDir: filepath.Join(root, "state")}
		if occupied {
			if err := os.MkdirAll(c.StorageDir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(c.StorageDir, "old.py"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		var log bytes.Buffer
		vol, err := c.storageFS(limits, true, slog.New(slog.NewTextHandler(&log, nil)))
		if vol != nil {
			t.Cleanup(func() { vol.Close() })
		}
		return vol, err, log.String()
	}
	if vol, err, log := start(t, "meter", false); vol != nil || err != nil || !strings.Contains(log, "PYBOX_QUOTA_MODE=meter") {
		t.Fatalf("meter: %v %v\n%s", vol, err, log)
	}
	if vol, err, log := start(t, "auto", true); vol != nil || err != nil || !strings.Contains(log, "already holds files") {
		t.Fatalf("auto over a folder with files: %v %v\n%s", vol, err, log)
	}
	if quotafs.Available() != nil {
		if vol, err, _ := start(t, "filesystem", false); vol != nil || !errors.Is(err, quotafs.ErrUnavailable) {
			t.Fatalf("filesystem where impossible: %v %v", vol, err)
		}
		return
	}
	if vol, err, _ := start(t, "filesystem", true); vol != nil || !errors.Is(err, quotafs.ErrOccupied) || !strings.Contains(err.Error(), "PYBOX_QUOTA_MODE=filesystem") {
		t.Fatalf("filesystem over a folder with files: %v %v", vol, err)
	}
	if vol, err, log := start(t, "auto", false); vol == nil || err != nil || !strings.Contains(log, "filesystem image of its own") {
		t.Fatalf("auto where possible: %v %v\n%s", vol, err, log)
	}
	if vol, err, _ := start(t, "filesystem", false); vol == nil || err != nil {
		t.Fatalf("filesystem where possible: %v %v", vol, err)
	}
	if _, err, _ := start(t, "quota", false); err == nil {
		t.Fatal("an unknown mode was accepted")
	}
}
