package sandbox

import (
	"bytes"
	"sync"
)

// capBuffer keeps the first max bytes written to it and remembers whether
// more arrived. Writes never fail, so the program is never blocked or
// killed by a full buffer; the excess is dropped. Safe for concurrent use.
type capBuffer struct {
	mu        sync.Mutex
	buf       bytes.Buffer
	max       int
	truncated bool
	onWrite   func([]byte) // optional live view of every chunk (progress)
}

func (c *capBuffer) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(p)
	if c.onWrite != nil {
		c.onWrite(p)
	}
	if room := c.max - c.buf.Len(); len(p) > room {
		p = p[:max(room, 0)]
		c.truncated = true
	}
	c.buf.Write(p)
	return n, nil
}

func (c *capBuffer) result() (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String(), c.truncated
}

// tailWriter keeps the last max bytes written to it. Safe for concurrent use.
type tailWriter struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (t *tailWriter) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tailWriter) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
