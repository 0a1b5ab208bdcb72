//go:build !windows

package main

import (
	"bytes"
	"strings"
	"sync"
	"time"
)

// syncBuffer is a bytes.Buffer safe for the server's stderr copier. The
// server writes its log from its own goroutines, so a line about a call
// may come after the call's reply: await waits for it.
type syncBuffer struct {
	mu      sync.Mutex
	b       bytes.Buffer
	changed chan struct{} // closed by the next Write; nil when nobody waits
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.changed != nil {
		close(b.changed)
		b.changed = nil
	}
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// logWait bounds how long a test waits for a line of another process's
// log: generous, for a loaded machine; a line that never comes costs it.
const logWait = 30 * time.Second

// await waits, up to logWait, until the log holds every one of want, waking
// at each write; it returns the log and whether it holds them all.
func (b *syncBuffer) await(want ...string) (string, bool) {
	deadline := time.NewTimer(logWait)
	defer deadline.Stop()
	for {
		b.mu.Lock()
		log := b.b.String()
		if containsAll(log, want) {
			b.mu.Unlock()
			return log, true
		}
		if b.changed == nil {
			b.changed = make(chan struct{})
		}
		changed := b.changed
		b.mu.Unlock()
		select {
		case <-changed:
		case <-deadline.C:
			log := b.String()
			return log, containsAll(log, want)
		}
	}
}

func containsAll(s string, want []string) bool {
	for _, w := range want {
		if !strings.Contains(s, w) {
			return false
		}
	}
	return true
}
