package sandbox

import (
	"fmt"
	"sync"

	"github.com/docker/go-units"

	"github.com/pybox-dev/pybox/internal/storage"
)

// Charge is the room for files the server copies into a workspace (a
// run's outputs after it ended): each is counted against the workspace's
// quota, and against the disk reserve, before it is written. One Charge
// per Sandbox is open at a time (Sandbox.Charge waits for the one before
// to be closed), so runs ending together cannot each take the same room.
type Charge struct {
	q        *quota
	room     storage.Usage // left; measured at the first Take
	measured bool
	release  func()
}

// Charge opens the account of what is copied into workspace, for one
// copy-back; Close it when done. It measures nothing until the first Take.
func (s *Sandbox) Charge(workspace string) *Charge {
	s.chargeMu.Lock()
	l := s.cfg.Limits
	q := &quota{quota: storage.Usage{Bytes: l.WorkspaceBytes, Files: l.WorkspaceFiles}, reserve: l.DiskReserve, dirs: []string{workspace}}
	return &Charge{q: q, release: sync.OnceFunc(s.chargeMu.Unlock)}
}

// Close ends the copy-back; safe on nil and twice.
func (c *Charge) Close() {
	if c != nil {
		c.release()
	}
}

// Take counts bytes in entries (a file and the folders made for it)
// against the room left, or fails with ErrQuota, counting nothing, when
// they would take the workspace past its quota or the disk under it below
// its reserve.
func (c *Charge) Take(bytes, entries int64) error {
	if !c.measured {
		u, err := measure(c.q.dirs, c.q.quota)
		if err != nil {
			return fmt.Errorf("measure the workspace: %w", err)
		}
		c.room = storage.Usage{Bytes: max(c.q.quota.Bytes-u.Bytes, 0), Files: max(c.q.quota.Files-u.Files, 0)}
		c.measured = true
	}
	if bytes > c.room.Bytes || entries > c.room.Files {
		return fmt.Errorf("%w: %s more would take the workspace past its quota of %s",
			ErrQuota, units.BytesSize(float64(bytes)), describe(c.q.quota, false))
	}
	if err := c.q.checkDiskFor(bytes); err != nil {
		return err
	}
	c.room.Bytes -= bytes
	c.room.Files -= entries
	return nil
}
