package downstream

import (
	"bytes"
	"strings"
	"sync"
	"time"
)

// syncBuf is a log buffer safe for concurrent writers. The servers' stderr
// reaches the log through a goroutine of its own, perhaps after the call a
// test acted on: await waits for a line.
type syncBuf struct {
	mu      sync.Mutex
	b       bytes.Buffer
	changed chan struct{} // closed by the next Write; nil when nobody waits
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
	return s.b.Write(p)
}

func (s *syncBuf) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// await waits, up to 30 s (a loaded machine), until the log holds want,
// waking at each write, and reports whether it does.
func (s *syncBuf) await(want string) bool {
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		if strings.Contains(s.b.String(), want) {
			s.mu.Unlock()
			return true
		}
		if s.changed == nil {
			s.changed = make(chan struct{})
		}
		changed := s.changed
		s.mu.Unlock()
		select {
		case <-changed:
		case <-deadline.C:
			return strings.Contains(s.String(), want)
		}
	}
}
