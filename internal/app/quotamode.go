package app

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/docker/go-units"

	"github.com/pybox-dev/pybox/internal/quotafs"
	"github.com/pybox-dev/pybox/sandbox"
)

// storageFS keeps the owner's folders (code storage, sessions, run output
// folders) on a filesystem image of their own when PYBOX_QUOTA_MODE says
// so (auto: where the host allows it), and says at start which mode is in
// force and why. nil: the meter measures the folders.
func (c *Config) storageFS(l sandbox.Limits, hostFolders bool, log *slog.Logger) (*quotafs.Volume, error) {
	mode, err := quotafs.ParseMode(c.QuotaMode)
	if err != nil {
		return nil, err
	}
	if mode == quotafs.Meter {
		log.Info("storage quota: the meter measures the owner's folders", "why", "PYBOX_QUOTA_MODE=meter")
		return nil, nil
	}
	vol, err := c.openStorageFS(l, hostFolders, log)
	switch {
	case err == nil:
		log.Info("storage quota: the owner's folders are on a filesystem image of its own, so the kernel refuses writes past the quota",
			"mode", mode, "image", filepath.Join(vol.HostDir(), "image.ext4"), "quota", units.BytesSize(float64(l.WorkspaceBytes)), "files", l.WorkspaceFiles)
		return vol, nil
	case mode == quotafs.Filesystem:
		return nil, fmt.Errorf("PYBOX_QUOTA_MODE=filesystem: %w", err)
	case errors.Is(err, quotafs.ErrUnavailable) || errors.Is(err, quotafs.ErrOccupied):
		log.Info("storage quota: the meter measures the owner's folders (PYBOX_QUOTA_MODE=auto)", "why", err.Error())
		return nil, nil
	}
	return nil, err
}

// openStorageFS opens the image of the owner whose folders c names.
func (c *Config) openStorageFS(l sandbox.Limits, hostFolders bool, log *slog.Logger) (*quotafs.Volume, error) {
	if !hostFolders {
		return nil, fmt.Errorf("%w: sandboxes run as pods (--backend kubernetes), which mount no host folders", quotafs.ErrUnavailable)
	}
	code, err := filepath.Abs(c.StorageDir)
	if err != nil {
		return nil, err
	}
	state, err := filepath.Abs(c.StateDir)
	if err != nil {
		return nil, err
	}
	return quotafs.Open(quotafs.Spec{Dir: filepath.Join(state, "quota"), Bytes: l.WorkspaceBytes, Files: l.WorkspaceFiles, Log: log,
		Binds: []quotafs.Bind{{Name: "code", Target: code}, {Name: "sessions", Target: filepath.Join(state, "sessions")}, {Name: "runs", Target: filepath.Join(state, "runs")}}})
}
