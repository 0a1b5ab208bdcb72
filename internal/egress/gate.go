package egress

import (
	"errors"
	"sync/atomic"
)

// Gate bounds the connections served at once by every proxy that shares
// it (Config.Shared): a tenant's runs together, whatever their number.
// Safe for concurrent use; a nil Gate bounds nothing.
type Gate struct {
	limit int64
	used  atomic.Int64
}

// NewGate returns a Gate of n connections at once.
func NewGate(n int) (*Gate, error) {
	if n < 1 {
		return nil, errors.New("egress gate: the limit must be at least 1")
	}
	return &Gate{limit: int64(n)}, nil
}

// take takes a place, or says there is none.
func (g *Gate) take() bool {
	if g == nil {
		return true
	}
	if g.used.Add(1) > g.limit {
		g.used.Add(-1)
		return false
	}
	return true
}

// give returns a place taken.
func (g *Gate) give() {
	if g != nil {
		g.used.Add(-1)
	}
}

// InUse is how many connections hold a place now.
func (g *Gate) InUse() int {
	if g == nil {
		return 0
	}
	return int(g.used.Load())
}

// Limit is the Gate's size.
func (g *Gate) Limit() int { return int(g.limit) }
