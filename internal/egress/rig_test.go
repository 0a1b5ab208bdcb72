package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// rig is a proxy on 127.0.0.1 with two destinations of the test: an HTTPS
// server named example.com (its certificate's name) and a plain HTTP server
// named plain.pybox.test, both on 127.0.0.1, which is in AllowAddrs.
type rig struct {
	t        testing.TB
	p        *Proxy
	addr     string
	tls      *httptest.Server
	plain    *httptest.Server
	tlsPort  int
	httpPort int
	seen     chan *http.Request // every request a destination got, with its body read
	mu       sync.Mutex
	dialed   []string
	stop     func() error // stops Serve and returns its error
}

var loopback = netip.MustParseAddr("127.0.0.1")

func newRig(t testing.TB, edit func(*Config)) *rig {
	r := &rig{t: t, seen: make(chan *http.Request, 100)}
	r.tls = httptest.NewUnstartedServer(http.HandlerFunc(r.serve))
	r.tls.Config.ErrorLog = log.New(io.Discard, "", 0) // cut handshakes are what some tests do
	r.tls.StartTLS()
	r.plain = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.tls.Close)
	t.Cleanup(r.plain.Close)
	r.tlsPort, r.httpPort = port(t, r.tls.URL), port(t, r.plain.URL)
	allow, err := ParseAllowlist([]string{
		fmt.Sprintf("example.com:%d", r.tlsPort),
		fmt.Sprintf("*.pybox.test:%d", r.httpPort),
		fmt.Sprintf("*.pybox.test:%d", r.tlsPort),
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		Allow:      allow,
		AllowAddrs: []netip.Prefix{netip.PrefixFrom(loopback, 32)},
		Resolver:   testResolver(t),
		Limits:     Limits{HeaderTimeout: 20 * time.Second, IdleTimeout: 20 * time.Second},
	}
	if edit != nil {
		edit(&cfg)
	}
	cfg.Dial = r.dial
	r.start(cfg)
	return r
}

func testResolver(t testing.TB) *TestResolver {
	own := netip.MustParseAddr("192.0.2.2")
	if a := ownAddr(); a.IsValid() {
		own = a
	}
	res, err := NewTestResolver(map[string][]netip.Addr{
		"example.com":       {loopback},
		"plain.pybox.test":  {loopback},
		"meta.pybox.test":   {netip.MustParseAddr("169.254.169.254")},
		"own.pybox.test":    {own},
		"mixed.pybox.test":  {loopback, netip.MustParseAddr("10.1.2.3")},
		"mapped.pybox.test": {netip.MustParseAddr("::ffff:169.254.169.254")},
	})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// ownAddr returns a non-loopback address of this host, if it has one.
func ownAddr() netip.Addr {
	for _, a := range interfaceAddrs() {
		if !a.IsLoopback() && !a.IsLinkLocalUnicast() {
			return a
		}
	}
	return netip.Addr{}
}

func (r *rig) start(cfg Config) {
	p, err := New(cfg)
	if err != nil {
		r.t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		r.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Serve(ctx, l) }()
	r.stop = sync.OnceValue(func() error {
		cancel()
		return <-done
	})
	r.t.Cleanup(func() {
		if err := r.stop(); err != nil {
			r.t.Errorf("Serve: %v", err)
		}
	})
	r.p, r.addr = p, l.Addr().String()
}

func (r *rig) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if _, err := netip.ParseAddrPort(addr); err != nil {
		r.t.Errorf("the proxy dialed %q, not a checked IP address", addr)
		return nil, err
	}
	r.mu.Lock()
	r.dialed = append(r.dialed, addr)
	r.mu.Unlock()
	return (&net.Dialer{}).DialContext(ctx, network, addr)
}

func (r *rig) dials() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.dialed...)
}

// serve is both destinations: /bytes?n=N sends N bytes, anything else
// echoes the request's size.
func (r *rig) serve(w http.ResponseWriter, req *http.Request) {
	n, _ := io.Copy(io.Discard, req.Body) // a cut upload ends early; n says how far it got
	req.ContentLength = n
	select {
	case r.seen <- req:
	default:
	}
	if s := req.URL.Query().Get("drip"); s != "" {
		drips, _ := strconv.Atoi(s)
		dripTo(w, drips)
		return
	}
	if s := req.URL.Query().Get("n"); s != "" {
		size, _ := strconv.Atoi(s)
		w.Header().Set("Content-Length", s)
		io.CopyN(w, zeros{}, int64(size))
		return
	}
	fmt.Fprintf(w, "hello %d", n)
}

// dripTo sends n bytes, one each 50 ms.
func dripTo(w http.ResponseWriter, n int) {
	w.Header().Set("Content-Length", strconv.Itoa(n))
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for range n {
		<-tick.C
		w.Write([]byte("d"))
		w.(http.Flusher).Flush()
	}
}

type zeros struct{}

func (zeros) Read(b []byte) (int, error) { clear(b); return len(b), nil }

// client is an HTTP client that goes through the proxy and trusts the
// HTTPS destination's certificate.
func (r *rig) client() *http.Client {
	pool := x509.NewCertPool()
	pool.AddCert(r.tls.Certificate())
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		Proxy:             http.ProxyURL(&url.URL{Scheme: "http", Host: r.addr}),
		TLSClientConfig:   &tls.Config{RootCAs: pool},
		DisableKeepAlives: true,
	}}
}

// raw sends text to the proxy and returns its response, body read.
func (r *rig) raw(text string) (*http.Response, string) {
	r.t.Helper()
	c, err := net.Dial("tcp", r.addr)
	if err != nil {
		r.t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(c, text); err != nil {
		r.t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		r.t.Fatalf("reading the proxy's answer to %q: %v", text, err)
	}
	body, _ := io.ReadAll(resp.Body) // a CONNECT's 200 has no end; the tests ask for refusals
	return resp, string(body)
}

func port(t testing.TB, u string) int {
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(pu.Port())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// waitFor polls cond until it holds or the limit passes.
func waitFor(limit time.Duration, cond func() bool) bool {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	end := time.After(limit)
	for !cond() {
		select {
		case <-end:
			return false
		case <-tick.C:
		}
	}
	return true
}

// dest returns the report's entry for host:port.
func (r *rig) dest(host string, port int) Destination {
	for _, d := range r.p.Report().Destinations {
		if d.Host == host && d.Port == port {
			return d
		}
	}
	r.t.Fatalf("no report entry for %s:%d in %v", host, port, r.p.Report())
	return Destination{}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// wantOK sends req through the proxy and wants a 200 with body want.
func (r *rig) wantOK(req *http.Request, want string) {
	r.t.Helper()
	resp, err := r.client().Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || string(body) != want {
		r.t.Fatalf("got %d %q (%v), want 200 %q", resp.StatusCode, body, err, want)
	}
}
