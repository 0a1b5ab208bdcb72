package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// Limits bound one run's traffic. The zero value of each field means its
// default; a negative value is an error.
type Limits struct {
	BytesOut int64 // bytes sent to destinations, all connections together; default 1 GiB
	BytesIn  int64 // bytes received from destinations; default 4 GiB

	Concurrent int // connections served at once; default 64. The rest are closed before reading.
	Total      int // connections accepted in all; default 4096

	HeaderBytes int // size of a request head (request line and headers); default 32 KiB

	HeaderTimeout time.Duration // to send a whole request head; default 10 s
	IdleTimeout   time.Duration // without a byte either way; default 2 min
	DialTimeout   time.Duration // to resolve and connect to a destination; default 10 s
}

// defaultLimits are the limits used for zero fields (documented on Limits).
var defaultLimits = Limits{
	BytesOut: 1 << 30, BytesIn: 4 << 30,
	Concurrent: 64, Total: 4096, HeaderBytes: 32 << 10,
	HeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute, DialTimeout: 10 * time.Second,
}

func (l Limits) withDefaults() (Limits, error) {
	d := defaultLimits
	if l.BytesOut < 0 || l.BytesIn < 0 || l.Concurrent < 0 || l.Total < 0 || l.HeaderBytes < 0 ||
		l.HeaderTimeout < 0 || l.IdleTimeout < 0 || l.DialTimeout < 0 {
		return l, errors.New("egress limits: negative value")
	}
	pick(&l.BytesOut, d.BytesOut)
	pick(&l.BytesIn, d.BytesIn)
	pick(&l.Concurrent, d.Concurrent)
	pick(&l.Total, d.Total)
	pick(&l.HeaderBytes, d.HeaderBytes)
	pick(&l.HeaderTimeout, d.HeaderTimeout)
	pick(&l.IdleTimeout, d.IdleTimeout)
	pick(&l.DialTimeout, d.DialTimeout)
	return l, nil
}

func pick[T int | int64 | time.Duration](v *T, def T) {
	if *v == 0 {
		*v = def
	}
}

// Config configures a Proxy; its zero value is a valid proxy that refuses
// everything.
type Config struct {
	Allow      Allowlist
	AllowAddrs []netip.Prefix // destinations exempt from the private/loopback/link-local/own-address refusal
	Limits     Limits
	// Shared, when set, also bounds the connections at once of every
	// proxy given the same Gate (a tenant's runs): past it a connection is
	// turned away as past Limits.Concurrent.
	Shared   *Gate
	Resolver Resolver                                                          // nil: net.DefaultResolver
	Dial     func(ctx context.Context, network, addr string) (net.Conn, error) // nil: a net.Dialer; always given a checked IP, never a name
	Log      *slog.Logger                                                      // nil: discard
}

// Proxy is one run's egress proxy.
type Proxy struct {
	allow  Allowlist
	addrs  []netip.Prefix
	limits Limits
	res    Resolver
	dial   func(ctx context.Context, network, addr string) (net.Conn, error)
	log    *slog.Logger
	own    func() []netip.Addr
	shared *Gate

	active   atomic.Int64 // connections being served
	accepted atomic.Int64 // connections accepted in all
	out, in  budget
	rep      ledger
}

// New validates cfg and returns a proxy; it is not serving until Serve.
func New(cfg Config) (*Proxy, error) {
	l, err := cfg.Limits.withDefaults()
	if err != nil {
		return nil, err
	}
	p := &Proxy{allow: cfg.Allow, limits: l, res: cfg.Resolver, dial: cfg.Dial, log: cfg.Log, own: interfaceAddrs, shared: cfg.Shared}
	for _, pr := range cfg.AllowAddrs {
		if !pr.IsValid() {
			return nil, fmt.Errorf("egress allowed addresses: invalid prefix %v", pr)
		}
		if pr.Addr().Is4In6() && pr.Bits() >= 96 { // ::ffff:a.b.c.d/n names a.b.c.d/(n-96): addresses are unmapped before the check
			pr = netip.PrefixFrom(pr.Addr().Unmap(), pr.Bits()-96)
		}
		p.addrs = append(p.addrs, pr.Masked())
	}
	if p.res == nil {
		p.res = net.DefaultResolver
	}
	if p.dial == nil {
		p.dial = (&net.Dialer{}).DialContext
	}
	if p.log == nil {
		p.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	p.out.left.Store(l.BytesOut)
	p.in.left.Store(l.BytesIn)
	return p, nil
}

// Report returns what the proxy has done so far.
func (p *Proxy) Report() Report { return p.rep.report() }

// Serve accepts connections on l until ctx is done or l is closed, then
// closes l and every connection and waits for every goroutine it started.
// It returns nil in both cases, or the listener's error.
func (p *Proxy) Serve(ctx context.Context, l net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	s := &server{p: p, conns: map[net.Conn]struct{}{}}
	var wg sync.WaitGroup
	wg.Go(func() {
		<-ctx.Done()
		l.Close() // unblocks Accept; its error is the reason we are here
		s.closeAll()
	})
	err := s.acceptLoop(ctx, l, &wg)
	cancel()
	wg.Wait()
	return err
}

// server tracks the connections of one Serve call.
type server struct {
	p      *Proxy
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

func (s *server) acceptLoop(ctx context.Context, l net.Listener, wg *sync.WaitGroup) error {
	backoff := 5 * time.Millisecond
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			s.p.log.Warn("egress proxy accept failed", "err", err)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		if why := s.p.admit(); why != "" {
			s.p.turnAway(c, why)
			continue
		}
		if !s.track(c) {
			s.p.release()
			continue
		}
		wg.Go(func() {
			defer s.p.release()
			defer s.untrack(c)
			s.serveConn(ctx, c)
		})
	}
}

// admit takes a place for a new connection (the run's, and the shared
// Gate's), or says why there is none.
func (p *Proxy) admit() string {
	if p.active.Add(1) > int64(p.limits.Concurrent) {
		p.active.Add(-1)
		return fmt.Sprintf("too many connections at once (limit %d)", p.limits.Concurrent)
	}
	if !p.shared.take() {
		p.active.Add(-1)
		return fmt.Sprintf("too many connections at once across the tenant's runs (limit %d)", p.shared.Limit())
	}
	if p.accepted.Add(1) > int64(p.limits.Total) {
		p.release()
		return fmt.Sprintf("connection limit reached (%d in all)", p.limits.Total)
	}
	return ""
}

// release returns the places admit took.
func (p *Proxy) release() {
	p.active.Add(-1)
	p.shared.give()
}

// turnAway answers a connection it will not read from and closes it. The
// write goes to a fresh socket's empty buffer, so it does not block; the
// deadline bounds it anyway.
func (p *Proxy) turnAway(c net.Conn, why string) {
	p.rep.drop()
	p.log.Info("egress connection turned away", "reason", why)
	_ = c.SetWriteDeadline(time.Now().Add(50 * time.Millisecond)) // best effort: the close below is what counts
	_, _ = io.WriteString(c, refusal(503, "", why))               // best effort, as above
	c.Close()
}

// track registers c so closeAll reaches it; false (and c closed) when the
// server is closing.
func (s *server) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		c.Close()
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *server) untrack(c net.Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	c.Close()
}

func (s *server) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for c := range s.conns {
		c.Close()
	}
}
