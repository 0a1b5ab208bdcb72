package egress

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestFlood opens 1,000 connections at once: the proxy serves Concurrent of
// them, closes the rest unread, and its goroutines stay bounded.
func TestFlood(t *testing.T) {
	const conc, flood = 16, 1000
	r := newRig(t, func(c *Config) { c.Limits.Concurrent = conc })
	runtime.GC()
	base := runtime.NumGoroutine()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	conns := make([]net.Conn, 0, flood)
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	peak := 0
	for range flood {
		c, err := net.Dial("tcp", r.addr)
		if err != nil {
			t.Fatalf("dial %d: %v", len(conns), err)
		}
		conns = append(conns, c)
		peak = max(peak, runtime.NumGoroutine())
	}
	if !waitFor(30*time.Second, func() bool { return r.p.Report().Dropped == flood-conc }) {
		t.Fatalf("dropped %d connections, want %d", r.p.Report().Dropped, flood-conc)
	}
	peak = max(peak, runtime.NumGoroutine())
	// One goroutine per served connection, plus slack for the runtime and
	// the test's servers.
	if limit := base + conc + 8; peak > limit {
		t.Errorf("%d goroutines with %d connections open, want at most %d", peak, flood, limit)
	}
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if grew := int64(after.HeapInuse) - int64(before.HeapInuse); grew > 32<<20 {
		t.Errorf("heap grew by %d bytes during the flood", grew)
	}
	c := conns[flood-1] // accepted last: turned away
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != 503 || !strings.Contains(resp.Status, "too many connections at once (limit 16)") {
		t.Errorf("turned-away connection: %v %v", resp, err)
	}
	for _, c := range conns {
		c.Close()
	}
	if !waitFor(30*time.Second, func() bool { return runtime.NumGoroutine() <= base+2 }) {
		t.Errorf("%d goroutines after the flood closed, want about %d", runtime.NumGoroutine(), base)
	}
	if _, err := r.client().Get(fmt.Sprintf("https://example.com:%d/", r.tlsPort)); err != nil {
		t.Errorf("a request after the flood: %v", err)
	}
}

// TestSlowLoris: a client that sends its head a byte at a time is cut at
// the header timeout, however often it sends.
func TestSlowLoris(t *testing.T) {
	const timeout = 300 * time.Millisecond
	r := newRig(t, func(c *Config) { c.Limits.HeaderTimeout = timeout })
	start := time.Now() // before the dial: the proxy may accept before Dial returns
	c, err := net.Dial("tcp", r.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { drip(c, fmt.Sprintf("CONNECT example.com:%d HTTP/1.1\r\nX-Slow: ", r.tlsPort), stop) })
	defer wg.Wait()
	defer close(stop)
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	reply, err := io.ReadAll(c)
	took := time.Since(start)
	if took < timeout || took > 15*time.Second {
		t.Errorf("closed after %v, want after the %v header timeout", took, timeout)
	}
	if len(reply) > 0 && !strings.HasPrefix(string(reply), "HTTP/1.1 408 pybox egress: request head not sent within 300ms") {
		t.Errorf("reply %q (err %v)", reply, err)
	}
	if d := r.p.Report().Dropped; d != 1 {
		t.Errorf("dropped %d, want 1", d)
	}
}

// drip writes head, then a byte every 10 ms until stopped or refused.
func drip(c net.Conn, head string, stop chan struct{}) {
	if _, err := io.WriteString(c, head); err != nil {
		return
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			if _, err := c.Write([]byte("a")); err != nil {
				return
			}
		}
	}
}

func TestDownloadLimit(t *testing.T) {
	r := newRig(t, func(c *Config) { c.Limits.BytesIn = 1 << 20 })
	resp, err := r.client().Get(fmt.Sprintf("https://example.com:%d/bytes?n=%d", r.tlsPort, 4<<20))
	var n int64
	if err == nil {
		n, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if err == nil || n >= 1<<20 {
		t.Errorf("downloaded %d bytes (err %v), want a cut under 1 MiB", n, err)
	}
	d := r.dest("example.com", r.tlsPort)
	if d.BytesIn != 1<<20 || !strings.Contains(d.Reason, "cut: the run's download limit (1 MiB) was reached") {
		t.Errorf("report entry %+v, want exactly 1 MiB in and the cut", d)
	}
	// The budget is the run's: the next connection gets nothing.
	if resp, err := r.client().Get(fmt.Sprintf("https://example.com:%d/", r.tlsPort)); err == nil {
		resp.Body.Close()
		t.Errorf("a request after the limit succeeded")
	}
}

func TestUploadLimit(t *testing.T) {
	r := newRig(t, func(c *Config) { c.Limits.BytesOut = 1 << 20 })
	u := fmt.Sprintf("http://plain.pybox.test:%d/up", r.httpPort)
	resp, err := r.client().Post(u, "application/octet-stream", io.LimitReader(zeros{}, 4<<20))
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Errorf("a 4 MiB upload went through a 1 MiB limit")
		}
	}
	select {
	case got := <-r.seen:
		if got.ContentLength >= 1<<20 {
			t.Errorf("the destination got %d body bytes, want under 1 MiB", got.ContentLength)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the destination never saw the cut upload end")
	}
	if !waitFor(10*time.Second, func() bool { return contains(r.dest("plain.pybox.test", r.httpPort).Reason, "upload limit") }) {
		t.Errorf("report entry %+v, want the cut", r.dest("plain.pybox.test", r.httpPort))
	}
	if d := r.dest("plain.pybox.test", r.httpPort); d.BytesOut != 1<<20 {
		t.Errorf("report counts %d bytes out, want exactly 1 MiB", d.BytesOut)
	}
}

// TestTotalLimit: connections past Total are closed unread.
func TestTotalLimit(t *testing.T) {
	r := newRig(t, func(c *Config) { c.Limits.Total = 2 })
	u := fmt.Sprintf("http://plain.pybox.test:%d/", r.httpPort)
	for i := range 2 {
		if _, err := r.client().Get(u); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	resp, err := r.client().Get(u)
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode != 503 || !strings.Contains(resp.Status, "connection limit reached (2 in all)") {
			t.Errorf("third request: %s, want 503 at the limit", resp.Status)
		}
	}
	if d := r.p.Report(); d.Dropped != 1 || d.Destinations[0].Conns != 2 {
		t.Errorf("report %+v", d)
	}
}

// TestIdleTimeout: a tunnel where nothing moves is closed after the idle
// timeout; one where only the download moves is not.
func TestIdleTimeout(t *testing.T) {
	const idle = 300 * time.Millisecond
	r := newRig(t, func(c *Config) { c.Limits.IdleTimeout = idle })
	var start time.Time // before the request: the proxy's last activity (its 200) comes after
	connect := func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", r.addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(20 * time.Second))
		start = time.Now()
		fmt.Fprintf(c, "CONNECT plain.pybox.test:%d HTTP/1.1\r\n\r\n", r.httpPort)
		br := bufio.NewReader(c)
		if resp, err := http.ReadResponse(br, &http.Request{Method: "CONNECT"}); err != nil || resp.StatusCode != 200 {
			t.Fatalf("CONNECT: %v %v", resp, err)
		}
		return c, br
	}
	quiet, br := connect()
	if _, err := io.ReadAll(br); err != nil || time.Since(start) < idle {
		t.Errorf("quiet tunnel ended after %v (%v), want closed after %v", time.Since(start), err, idle)
	}
	quiet.Close()
	busy, br := connect()
	fmt.Fprintf(busy, "GET /?drip=16 HTTP/1.1\r\nHost: plain.pybox.test\r\n\r\n") // 800 ms of bytes, 50 ms apart
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil || string(body) != strings.Repeat("d", 16) {
		t.Errorf("a download longer than the idle timeout: %q, %v", body, err)
	}
}

// TestSharedGate: two proxies (two runs of one tenant) sharing a Gate of 3
// serve 3 connections at once between them, though each may serve 64: the
// fourth, on either, is turned away with a 503 naming the tenant's limit,
// and a place freed on one proxy serves the other.
func TestSharedGate(t *testing.T) {
	g, err := NewGate(3)
	if err != nil {
		t.Fatal(err)
	}
	a := newRig(t, func(c *Config) { c.Shared = g })
	b := newRig(t, func(c *Config) { c.Shared = g })
	hold := func(r *rig) net.Conn { // a tunnel held open: it keeps its place
		c, err := net.Dial("tcp", r.addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		fmt.Fprintf(c, "CONNECT example.com:%d HTTP/1.1\r\nHost: example.com:%d\r\n\r\n", r.tlsPort, r.tlsPort)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("tunnel: %v %v", resp, err)
		}
		return c
	}
	first := hold(a)
	hold(a)
	hold(b)
	if g.InUse() != 3 {
		t.Fatalf("%d places in use, want 3", g.InUse())
	}
	_, body := b.raw(fmt.Sprintf("GET http://plain.pybox.test:%d/ HTTP/1.1\r\nHost: plain.pybox.test:%d\r\n\r\n", b.httpPort, b.httpPort))
	if !strings.Contains(body, "across the tenant's runs (limit 3)") {
		t.Errorf("a fourth connection: %q", body)
	}
	if b.p.Report().Dropped != 1 {
		t.Errorf("dropped %d, want 1", b.p.Report().Dropped)
	}
	first.Close()
	if !waitFor(10*time.Second, func() bool { return g.InUse() == 2 }) {
		t.Fatalf("%d places in use after a tunnel closed, want 2", g.InUse())
	}
	hold(b)
	if _, err := NewGate(0); err == nil {
		t.Error("a Gate of 0 was taken")
	}
}
