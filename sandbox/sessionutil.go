package sandbox

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"sync"
	"time"
)

// LabelSession carries the session id on a session's container.
const LabelSession = "pybox.session"

// teardownWait bounds how long we wait for a killed kernel's exit status.
const teardownWait = 15 * time.Second

func newNonce() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on Linux (documented)
	return hex.EncodeToString(b)
}

// logWriter turns a kernel's own stderr into log lines.
type logWriter struct {
	log     *slog.Logger
	session string
	mu      sync.Mutex
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, line := range bytes.Split(bytes.TrimSpace(p), []byte("\n")) {
		if len(line) > 0 {
			w.log.Warn("session kernel stderr", "session_id", w.session, "line", string(line))
		}
	}
	return len(p), nil
}
