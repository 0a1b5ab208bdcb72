package sandbox

import (
	"sync"

	"github.com/pybox-dev/pybox/internal/storage"
)

// Charge is the room for files the server copies into a workspace (a
// run's outputs after it ended): each is reserved in the owner's Account
// (with all its folders, against its quota and the disk reserve) before it
// is written. One Charge per Sandbox is open at a time (Sandbox.Charge
// waits for the one before to be closed), so runs ending together cannot
// each take the same room.
type Charge struct {
	acct     *Account
	uncover  func()
	releases []func()
	fresh    bool // the account was brought up to date for this copy-back
	close    func()
}

// Charge opens the account of what is copied into workspace, for one
// copy-back; Close it when done. It measures nothing until the first Take.
func (s *Sandbox) Charge(workspace string) *Charge {
	s.chargeMu.Lock()
	c := &Charge{acct: s.acct, uncover: s.acct.cover(workspace)}
	c.close = sync.OnceFunc(func() {
		for _, r := range c.releases {
			r() // what was copied stays charged until it is measured
		}
		c.uncover()
		s.chargeMu.Unlock()
	})
	return c
}

// Close ends the copy-back; safe on nil and twice.
func (c *Charge) Close() {
	if c != nil {
		c.close()
	}
}

// Take counts bytes in entries (a file and the folders made for it)
// against the owner's room, or fails with ErrQuota, counting nothing, when
// they would take it past its quota or the disk under it below its
// reserve.
func (c *Charge) Take(bytes, entries int64) error {
	if !c.fresh {
		if err := c.acct.refresh(); err != nil {
			return err
		}
		c.fresh = true
	}
	release, err := c.acct.Reserve(storage.Usage{Bytes: bytes, Files: entries})
	if err != nil {
		return err
	}
	c.releases = append(c.releases, release)
	return nil
}
