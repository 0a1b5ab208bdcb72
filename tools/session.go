package tools

import (
	"path"
	"strings"

	"github.com/pybox-dev/pybox/internal/storage"
	"github.com/pybox-dev/pybox/sandbox"
)

// sessionsDir holds each session's own workspace, sessions/<id>; a
// session's container mounts only its own.
const sessionsDir = "sessions"

// sessionDir opens (creating it) the workspace of session id.
func (h *handlers) sessionDir(id string) (*storage.Dir, error) {
	if err := sandbox.ValidSessionID(id); err != nil {
		return nil, err
	}
	return h.cfg.Storage.Sub(path.Join(sessionsDir, id))
}

// sessionFilename is how the program's file appears inside the session's
// container: under /workspace when it lives in the session's own folder,
// else its path in code storage (shown in tracebacks only).
func sessionFilename(id, rel string) string {
	prefix := path.Join(sessionsDir, id) + "/"
	if strings.HasPrefix(rel, prefix) {
		return sandbox.WorkspaceMount + "/" + strings.TrimPrefix(rel, prefix)
	}
	return rel
}
