package sandbox

import (
	"crypto/rand"
	"encoding/hex"
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
