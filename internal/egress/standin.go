// Package egress is a STAND-IN for the egress proxy that the egressproxy
// helper is writing (same API); delete this file when theirs lands.
package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

type entry struct {
	host   string
	suffix bool
	port   int
}

// Allowlist is a parsed list of host patterns.
type Allowlist struct{ entries []entry }

// ParseAllowlist parses "host", "host:port", "*.suffix", "*.suffix:port".
func ParseAllowlist(entries []string) (Allowlist, error) {
	var a Allowlist
	for _, e := range entries {
		h, p, err := net.SplitHostPort(e)
		port := 0
		if err != nil {
			h = e
		} else if port, err = strconv.Atoi(p); err != nil || port < 1 || port > 65535 {
			return Allowlist{}, fmt.Errorf("egress allowlist entry %q: bad port", e)
		}
		h = strings.ToLower(strings.TrimSuffix(h, "."))
		suffix := strings.HasPrefix(h, "*.")
		h = strings.TrimPrefix(h, "*.")
		if h == "" || strings.ContainsAny(h, "*/ @") {
			return Allowlist{}, fmt.Errorf("egress allowlist entry %q: not a host name", e)
		}
		a.entries = append(a.entries, entry{h, suffix, port})
	}
	return a, nil
}

// Empty: nothing is allowed.
func (a Allowlist) Empty() bool { return len(a.entries) == 0 }

func (a Allowlist) allows(host string, port int) bool {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	for _, e := range a.entries {
		if e.port != 0 && e.port != port {
			continue
		}
		if host == e.host || (e.suffix && strings.HasSuffix(host, "."+e.host)) {
			return true
		}
	}
	return false
}

// Limits bound one proxy.
type Limits struct {
	BytesOut, BytesIn              int64
	Concurrent, Total, HeaderBytes int
	IdleTimeout, HeaderTimeout     time.Duration
}

// Resolver resolves names.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// StaticResolver maps names to addresses (tests only).
type StaticResolver map[string]netip.Addr

// LookupNetIP implements Resolver.
func (r StaticResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := r[strings.ToLower(host)]; ok {
		return []netip.Addr{a}, nil
	}
	return nil, fmt.Errorf("no such host %q", host)
}

// Config configures a Proxy.
type Config struct {
	Allow      Allowlist
	AllowAddrs []netip.Prefix
	Limits     Limits
	Resolver   Resolver
	Dial       func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Proxy is one run's proxy.
type Proxy struct {
	cfg  Config
	mu   sync.Mutex
	dest map[string]*Dest
	wg   sync.WaitGroup
}

// Dest is what one destination saw.
type Dest struct {
	Addr        string
	Allowed     bool
	Reason      string
	Connections int
	BytesIn     int64
	BytesOut    int64
}

// Report is what the proxy saw.
type Report struct{ Dests []Dest }

func (r Report) String() string {
	var parts []string
	for _, d := range r.Dests {
		if d.Allowed {
			parts = append(parts, fmt.Sprintf("allowed %s (%d connections, %d KiB)", d.Addr, d.Connections, (d.BytesIn+d.BytesOut+1023)/1024))
		} else {
			parts = append(parts, fmt.Sprintf("refused %s (%s)", d.Addr, d.Reason))
		}
	}
	return strings.Join(parts, ", ")
}

// New makes a proxy.
func New(cfg Config) (*Proxy, error) {
	if cfg.Resolver == nil {
		cfg.Resolver = net.DefaultResolver
	}
	if cfg.Dial == nil {
		var d net.Dialer
		cfg.Dial = d.DialContext
	}
	return &Proxy{cfg: cfg, dest: map[string]*Dest{}}, nil
}

// Report returns what the proxy saw.
func (p *Proxy) Report() Report {
	p.mu.Lock()
	defer p.mu.Unlock()
	var r Report
	for _, d := range p.dest {
		r.Dests = append(r.Dests, *d)
	}
	sort.Slice(r.Dests, func(i, j int) bool { return r.Dests[i].Addr < r.Dests[j].Addr })
	return r
}

func (p *Proxy) note(addr string, allowed bool, reason string, in, out int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	d := p.dest[addr]
	if d == nil {
		d = &Dest{Addr: addr, Allowed: allowed, Reason: reason}
		p.dest[addr] = d
	}
	if allowed {
		d.Connections++
	}
	d.BytesIn += in
	d.BytesOut += out
}

// Serve serves l until ctx ends, then waits for every connection.
func (p *Proxy) Serve(ctx context.Context, l net.Listener) error {
	stop := context.AfterFunc(ctx, func() { l.Close() })
	defer stop()
	defer p.wg.Wait()
	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	cl := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		for c := range conns {
			c.Close()
		}
	})
	defer cl()
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		mu.Lock()
		conns[c] = true
		mu.Unlock()
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer func() { mu.Lock(); delete(conns, c); mu.Unlock() }()
			defer c.Close()
			p.handle(ctx, c)
		}()
	}
}

func (p *Proxy) handle(ctx context.Context, c net.Conn) {
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	host, portS, err := net.SplitHostPort(req.Host)
	if err != nil {
		host, portS = req.Host, "80"
		if req.Method == http.MethodConnect {
			portS = "443"
		}
	}
	port, _ := strconv.Atoi(portS)
	addr := net.JoinHostPort(strings.ToLower(host), portS)
	up, reason := p.dial(ctx, host, port)
	if up == nil {
		p.note(addr, false, reason, 0, 0)
		fmt.Fprintf(c, "HTTP/1.1 403 Forbidden\r\nContent-Length: %d\r\nConnection: close\r\n\r\npybox egress: %s", len(reason)+14, reason)
		return
	}
	defer up.Close()
	if req.Method == http.MethodConnect {
		io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n")
	} else {
		req.RequestURI = ""
		req.Header.Set("Connection", "close")
		if err := req.Write(up); err != nil {
			return
		}
	}
	in, out := pipe(c, br, up)
	p.note(addr, true, "", in, out)
}

func (p *Proxy) dial(ctx context.Context, host string, port int) (net.Conn, string) {
	if _, err := netip.ParseAddr(host); err == nil {
		return nil, "an IP address, not a host name"
	}
	if !p.cfg.Allow.allows(host, port) {
		return nil, "not on the allowlist"
	}
	addrs, err := p.cfg.Resolver.LookupNetIP(ctx, "ip", host)
	if err != nil || len(addrs) == 0 {
		return nil, "does not resolve"
	}
	a := addrs[0].Unmap()
	if !p.allowedAddr(a) {
		return nil, "resolves to a private address " + a.String()
	}
	up, err := p.cfg.Dial(ctx, "tcp", netip.AddrPortFrom(a, uint16(port)).String())
	if err != nil {
		return nil, "unreachable"
	}
	return up, ""
}

func (p *Proxy) allowedAddr(a netip.Addr) bool {
	for _, pf := range p.cfg.AllowAddrs {
		if pf.Contains(a) {
			return true
		}
	}
	return !(a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsUnspecified() || a.IsMulticast())
}

func pipe(c net.Conn, br *bufio.Reader, up net.Conn) (in, out int64) {
	done := make(chan int64, 1)
	go func() {
		n, _ := io.Copy(up, br)
		if cw, ok := up.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		done <- n
	}()
	in, _ = io.Copy(c, up)
	c.Close()
	out = <-done
	return in, out
}

var _ = errors.New
