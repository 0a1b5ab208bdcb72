package testenv

import (
	"bytes"
	"strings"
	"sync"
	"time"
)

// LogWait bounds how long a test waits for a line of another process's
// log: generous, for a loaded machine; a line that never comes costs it.
const LogWait = 30 * time.Second

// LogBuffer is a log sink safe for concurrent writers (a server's stderr
// copier, a goroutine relaying a child's stderr). Such a line may come
// after the reply a test acted on: Await waits for it.
type LogBuffer struct {
	mu      sync.Mutex
	b       bytes.Buffer
	changed chan struct{} // closed by the next Write; nil when nobody waits
}

func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.changed != nil {
		close(b.changed)
		b.changed = nil
	}
	return b.b.Write(p)
}

func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Await waits, up to LogWait, until the log holds every one of want, waking
// at each write; it returns the log and whether it holds them all.
func (b *LogBuffer) Await(want ...string) (string, bool) {
	deadline := time.NewTimer(LogWait)
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
