package images

import (
	"strings"
	"sync"
)

// tailBuffer keeps the last max bytes written (an installer's error is at
// its end). Safe for concurrent use by the stdout and stderr copiers.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
	max int
	cut bool
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf, t.cut = t.buf[over:], true
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := strings.TrimSpace(string(t.buf))
	if t.cut {
		return "...\n" + s
	}
	return s
}
