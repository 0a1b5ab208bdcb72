package tools

import (
	"errors"
	"fmt"

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

// openSessionDir opens the workspace of session id, which the session's
// start made; it makes nothing. A folder gone means the session was closed
// as this call began.
func (h *handlers) openSessionDir(id string) (*storage.Dir, error) {
	if h.cfg.Sessions == nil {
		return nil, errors.New("sessions are not configured (no sessions folder)")
	}
	d, err := h.cfg.Sessions.OpenSub(id)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, fmt.Errorf("%w: session %s was closed as this call began; call again for a new one", sandbox.ErrNoSession, id)
	}
	return d, err
}
