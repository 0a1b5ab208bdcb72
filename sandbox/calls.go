package sandbox

import (
	"errors"
	"fmt"
	"sync"
)

// MaxCallsInFlight bounds the tool calls of one turn being answered at
// once. A program's pybox_tools waits for each reply before its next call,
// so only a program that writes calls without reading their replies (or
// more processes than this calling at once) reaches it.
const MaxCallsInFlight = 16

// callSlack is how many call frames past its own limit (ToolCalls.Limit)
// a turn may send, refused, before it counts as a flood.
const callSlack = 64

// ErrToolFlood: the program sent tool calls far past its limits; pybox
// ended it and discarded its container.
var ErrToolFlood = errors.New("the program flooded its tool-call channel and was ended")

// callGate admits one turn's tool-call frames. Each frame is counted
// before anything is made for it (a goroutine, a reply); a frame past the
// bounds is refused with ErrToolFlood, and the turn is then ended.
type callGate struct {
	mu       sync.Mutex
	seen     int // call frames of the turn
	inFlight int // admitted and not yet answered
	limit    int // the calls the program may make
}

// DefaultCallLimit is the calls per run of a ToolCalls without a Limit.
const DefaultCallLimit = 50

func newCallGate(tools ToolCalls) *callGate {
	g := &callGate{}
	if tools != nil {
		g.limit = DefaultCallLimit
	}
	if l, ok := tools.(interface{ Limit() int }); ok {
		g.limit = max(l.Limit(), 0)
	}
	return g
}

// admit counts one call frame; on nil the caller answers it and then
// calls done.
func (g *callGate) admit() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.seen++
	switch {
	case g.seen > 2*g.limit+callSlack:
		return fmt.Errorf("%w: it sent %d tool calls, far past its limit of %d calls per run", ErrToolFlood, g.seen, g.limit)
	case g.inFlight >= MaxCallsInFlight:
		return fmt.Errorf("%w: it sent more than %d tool calls at once without waiting for their replies", ErrToolFlood, MaxCallsInFlight)
	}
	g.inFlight++
	return nil
}

// done ends an admitted call.
func (g *callGate) done() {
	g.mu.Lock()
	g.inFlight--
	g.mu.Unlock()
}
