package tools

import (
	"errors"

	"github.com/pybox-dev/pybox/internal/storage"
	"github.com/pybox-dev/pybox/sandbox"
)

// sessionDir opens (creating it) the workspace of session id: a folder of
// the sessions root, which is outside code storage and mounted by no
// container but the session's own (as its /workspace), so no other
// program can read it, plant files in it or swap it for a symlink.
func (h *handlers) sessionDir(id string) (*storage.Dir, error) {
	if err := sandbox.ValidSessionID(id); err != nil {
		return nil, err
	}
	if h.cfg.Sessions == nil {
		return nil, errors.New("sessions are not configured (no sessions folder)")
	}
	return h.cfg.Sessions.Sub(id)
}
