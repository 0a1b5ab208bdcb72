// Package logcap bounds what a logger writes: long values are cut, and a
// message logged over and over (one a sandboxed program can provoke at
// will) is rate-limited, with a count of what was left out. However much a
// program does, the server's log grows by a bounded amount per minute.
package logcap

import (
	"context"
	"log/slog"
	"sync"
	"time"
	"unicode/utf8"
)

// Limits of a Handler.
const (
	MaxValue = 1024            // bytes of a string value (message, attribute) kept
	Burst    = 20              // records of one message written at once before the rate applies
	Interval = 3 * time.Second // then one record of that message per interval
	maxKeys  = 4096            // messages tracked; beyond, the oldest state is forgotten
)

// Handler wraps another slog.Handler with the bounds above.
type Handler struct {
	next  slog.Handler
	state *state
}

type state struct {
	mu    sync.Mutex
	now   func() time.Time
	byMsg map[string]*bucket
}

// bucket is a token bucket per message.
type bucket struct {
	tokens     float64
	last       time.Time
	suppressed int
}

// New returns a Handler writing to next.
func New(next slog.Handler) *Handler {
	return &Handler{next: next, state: &state{now: time.Now, byMsg: map[string]*bucket{}}}
}

func (h *Handler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	suppressed, ok := h.state.admit(r.Message)
	if !ok {
		return nil
	}
	out := slog.NewRecord(r.Time, r.Level, cut(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(capAttr(a))
		return true
	})
	if suppressed > 0 {
		out.AddAttrs(slog.Int("suppressed_since_last", suppressed))
	}
	return h.next.Handle(ctx, out)
}

func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	capped := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		capped[i] = capAttr(a)
	}
	return &Handler{next: h.next.WithAttrs(capped), state: h.state}
}

func (h *Handler) WithGroup(name string) slog.Handler {
	return &Handler{next: h.next.WithGroup(name), state: h.state}
}

// admit takes a token for msg; it returns how many records of msg were
// dropped since the last one written.
func (s *state) admit(msg string) (suppressed int, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	b := s.byMsg[msg]
	if b == nil {
		if len(s.byMsg) >= maxKeys {
			clear(s.byMsg) // many distinct messages: start over rather than grow
		}
		b = &bucket{tokens: Burst, last: now}
		s.byMsg[msg] = b
	}
	b.tokens = min(Burst, b.tokens+now.Sub(b.last).Seconds()/Interval.Seconds())
	b.last = now
	if b.tokens < 1 {
		b.suppressed++
		return 0, false
	}
	b.tokens--
	suppressed, b.suppressed = b.suppressed, 0
	return suppressed, true
}

func capAttr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, cut(v.String()))
	case slog.KindGroup:
		attrs := v.Group()
		capped := make([]any, len(attrs))
		for i, g := range attrs {
			capped[i] = capAttr(g)
		}
		return slog.Group(a.Key, capped...)
	case slog.KindAny:
		if err, ok := v.Any().(error); ok {
			return slog.String(a.Key, cut(err.Error()))
		}
		return slog.String(a.Key, cut(v.String()))
	}
	return slog.Attr{Key: a.Key, Value: v}
}

// cut keeps at most MaxValue bytes of s, on a rune boundary, saying so.
func cut(s string) string {
	if len(s) <= MaxValue {
		return s
	}
	end := MaxValue
	for end > 0 && !utf8.RuneStart(s[end]) {
		end--
	}
	return s[:end] + "…[cut]"
}
