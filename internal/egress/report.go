package egress

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Report is what a proxy did: every destination asked for, in the order
// first asked, and the connections closed before they named one.
type Report struct {
	Destinations []Destination
	Dropped      int // connections closed unread or before naming a destination: over the limits, slow, malformed or overlong heads
}

// Destination aggregates the connections to one host:port.
type Destination struct {
	Host     string // normalised name or IP literal
	Port     int
	Allowed  bool   // at least one connection was allowed
	Reason   string // why the last refusal happened, or why an allowed transfer was cut
	Conns    int    // connections made
	Refused  int    // connections refused or failed (resolution, connection)
	BytesOut int64
	BytesIn  int64
}

// String renders the report in one line, for a run's result:
// "allowed api.example.com:443 (2 connections, 14 KiB), refused example.org:443 (not on the allowlist)".
//
// It names at most maxListed destinations (a program could ask for
// thousands of names) and counts the rest.
func (r Report) String() string {
	shown := r.Destinations[:min(len(r.Destinations), maxListed)]
	parts := make([]string, 0, len(shown)+2)
	for _, d := range shown {
		parts = append(parts, d.String())
	}
	if rest := r.Destinations[len(shown):]; len(rest) > 0 {
		allowed := 0
		for _, d := range rest {
			if d.Allowed {
				allowed++
			}
		}
		parts = append(parts, fmt.Sprintf("and %d more (%d allowed, %d refused)", len(rest), allowed, len(rest)-allowed))
	}
	if r.Dropped > 0 {
		parts = append(parts, fmt.Sprintf("%s closed unread (over the limits, slow or malformed)", plural(r.Dropped, "connection")))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// maxListed is how many destinations Report.String names.
const maxListed = 20

func (d Destination) String() string {
	hp := net.JoinHostPort(d.Host, strconv.Itoa(d.Port))
	if !d.Allowed {
		if d.Refused > 1 {
			return fmt.Sprintf("refused %s (%s; %d times)", hp, d.Reason, d.Refused)
		}
		return fmt.Sprintf("refused %s (%s)", hp, d.Reason)
	}
	s := fmt.Sprintf("allowed %s (%s, %s", hp, plural(d.Conns, "connection"), size(d.BytesOut+d.BytesIn))
	switch {
	case d.Refused > 0:
		s += fmt.Sprintf("; %d refused: %s", d.Refused, d.Reason)
	case d.Reason != "":
		s += "; " + d.Reason
	}
	return s + ")"
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// size renders a byte count: "512 B", "14 KiB", "1.5 MiB".
func size(n int64) string {
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	v, unit := float64(n), ""
	for _, u := range []string{"KiB", "MiB", "GiB", "TiB"} {
		v, unit = v/1024, u
		if v < 1024 {
			break
		}
	}
	s := strconv.FormatFloat(v, 'f', 1, 64)
	return strings.TrimSuffix(s, ".0") + " " + unit
}

// dest is one destination's live record.
type dest struct {
	host    string
	port    int
	allowed bool
	reason  string
	conns   int
	refused int
	out, in atomic.Int64
}

// ledger holds the destinations of a proxy; it holds at most Limits.Total
// of them, as every entry stands for an accepted connection.
type ledger struct {
	mu      sync.Mutex
	order   []*dest
	byKey   map[string]*dest
	dropped int
}

func (l *ledger) get(host string, port int) *dest {
	key := net.JoinHostPort(host, strconv.Itoa(port))
	if d := l.byKey[key]; d != nil {
		return d
	}
	if l.byKey == nil {
		l.byKey = map[string]*dest{}
	}
	d := &dest{host: host, port: port}
	l.byKey[key] = d
	l.order = append(l.order, d)
	return d
}

// allow records an allowed connection and returns its record for metering.
func (l *ledger) allow(host string, port int) *dest {
	l.mu.Lock()
	defer l.mu.Unlock()
	d := l.get(host, port)
	d.allowed = true
	d.conns++
	return d
}

// refuse records a refused or failed connection.
func (l *ledger) refuse(host string, port int, why string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	d := l.get(host, port)
	d.refused++
	d.reason = why
}

// cut records why an allowed transfer was ended.
func (l *ledger) cut(d *dest, why string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if d.refused == 0 {
		d.reason = "cut: " + why
	}
}

func (l *ledger) drop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dropped++
}

func (l *ledger) report() Report {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := Report{Dropped: l.dropped}
	for _, d := range l.order {
		r.Destinations = append(r.Destinations, Destination{
			Host: d.host, Port: d.port, Allowed: d.allowed, Reason: d.reason,
			Conns: d.conns, Refused: d.refused, BytesOut: d.out.Load(), BytesIn: d.in.Load(),
		})
	}
	return r
}
