package egress

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"runtime"
	"sync"
	"testing"
	"time"
)

// TestServeClosesEverything: when its context ends, Serve closes open
// tunnels and returns only after every goroutine it started has ended.
func TestServeClosesEverything(t *testing.T) {
	base := runtime.NumGoroutine()
	r := newRig(t, nil)
	c, err := net.Dial("tcp", r.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT example.com:%d HTTP/1.1\r\n\r\n", r.tlsPort)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: "CONNECT"})
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	if err := r.stop(); err != nil {
		t.Errorf("Serve returned %v, want nil", err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadAll(br); err != nil {
		t.Errorf("the tunnel was not closed: %v", err)
	}
	r.tls.Close()
	r.plain.Close()
	if !waitFor(10*time.Second, func() bool { return runtime.NumGoroutine() <= base }) {
		t.Errorf("%d goroutines after Serve returned, want %d", runtime.NumGoroutine(), base)
	}
}

func TestNewRejects(t *testing.T) {
	for name, cfg := range map[string]Config{
		"negative limit": {Limits: Limits{BytesIn: -1}},
		"bad prefix":     {AllowAddrs: []netip.Prefix{{}}},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: New succeeded", name)
		}
	}
	p, err := New(Config{AllowAddrs: []netip.Prefix{netip.MustParsePrefix("::ffff:10.0.0.0/104")}})
	if err != nil || p.limits != defaultLimits || p.addrs[0] != netip.MustParsePrefix("10.0.0.0/8") {
		t.Errorf("zero Config: %v, limits %+v, mapped prefix as %v", err, p.limits, p.addrs)
	}
}

// recordingResolver records the names it is asked for.
type recordingResolver struct {
	Resolver
	mu    sync.Mutex
	names []string
}

func (r *recordingResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	r.names = append(r.names, host)
	r.mu.Unlock()
	return r.Resolver.LookupNetIP(ctx, network, host)
}

// TestResolvesAbsoluteName: the proxy asks for the name as absolute, so a
// resolver's search domains cannot turn an allowed name into another one.
func TestResolvesAbsoluteName(t *testing.T) {
	rec := &recordingResolver{Resolver: testResolver(t)}
	r := newRig(t, func(c *Config) { c.Resolver = rec })
	req, _ := http.NewRequest("GET", fmt.Sprintf("http://PLAIN.pybox.test.:%d/", r.httpPort), nil)
	r.wantOK(req, "hello 0")
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if got, want := rec.names, []string{"plain.pybox.test."}; !equal(got, want) {
		t.Errorf("resolver asked for %q, want %q", got, want)
	}
}

// rebinder answers a name with an allowed address once, then with the
// metadata address, as a DNS rebinding attacker's server does.
type rebinder struct {
	mu    sync.Mutex
	calls int
}

func (b *rebinder) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls++
	if b.calls == 1 {
		return []netip.Addr{loopback}, nil
	}
	return []netip.Addr{netip.MustParseAddr("169.254.169.254")}, nil
}

// TestRebinding: the proxy resolves once and dials what it checked.
func TestRebinding(t *testing.T) {
	b := &rebinder{}
	r := newRig(t, func(c *Config) { c.Resolver = b })
	req, _ := http.NewRequest("GET", fmt.Sprintf("http://plain.pybox.test:%d/", r.httpPort), nil)
	r.wantOK(req, "hello 0")
	if got, want := r.dials(), []string{fmt.Sprintf("127.0.0.1:%d", r.httpPort)}; !equal(got, want) || b.calls != 1 {
		t.Errorf("dialed %v after %d lookups, want %v after one", got, b.calls, want)
	}
	resp, body := r.raw(fmt.Sprintf("GET http://plain.pybox.test:%d/ HTTP/1.1\r\n\r\n", r.httpPort))
	if resp.StatusCode != 403 || !contains(body, "169.254.169.254") {
		t.Errorf("the rebound answer: %d %q, want refused", resp.StatusCode, body)
	}
}
