//go:build !windows

package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestHTTPConnectionBounds: one client address opens many connections
// before authenticating (each gets a 401, then stays idle; or sends
// nothing; or sends headers a byte at a time). The server keeps at most
// PYBOX_MAX_CONNECTIONS_PER_CLIENT of them, closes the idle ones after
// PYBOX_HTTP_IDLE_TIMEOUT, its descriptors stay bounded, and /healthz
// still answers another address. The same holds for the metrics listener.
func TestHTTPConnectionBounds(t *testing.T) {
	parallelTest(t)
	metricsAddr := freeAddr(t)
	h := startHTTP(t, false, "PYBOX_MAX_CONNECTIONS_PER_CLIENT=16", "PYBOX_HTTP_IDLE_TIMEOUT=2s", "PYBOX_METRICS_ADDR="+metricsAddr)
	pid := h.cmd.Process.Pid
	fds0, _, _ := procStats(t, pid)
	attacker := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}, Timeout: 5 * time.Second}
	addr := strings.TrimPrefix(h.url, "http://")
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := range 150 {
		c, err := attacker.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		conns = append(conns, c)
		switch i % 3 {
		case 0: // a request that gets a 401; then the connection stays idle
			fmt.Fprintf(c, "GET /mcp HTTP/1.1\r\nHost: x\r\n\r\n")
		case 1: // slow loris: a first byte of headers, then nothing
			fmt.Fprintf(c, "G")
		}
	}
	for _, c := range conns[:2] { // one of them was answered 401 and is idle now
		c.Close()
	}
	if code := getStatus(t, h.url+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz from another address, while one address holds connections: HTTP %d", code)
	}
	fds, _, _ := procStats(t, pid)
	t.Logf("server descriptors: %d before, %d with 150 connections open from one address", fds0, fds)
	if fds > fds0+16+20 {
		t.Errorf("the server holds %d descriptors after one address opened 150 connections (%d before); want at most %d more",
			fds, fds0, 16+20)
	}
	// An answered connection left idle is closed by the server.
	c := idleAfter401(t, h.url)
	if err := waitClosed(c, 20*time.Second); err != nil {
		t.Errorf("a connection idle after its 401: %v", err)
	}
	// The metrics listener has the same bounds.
	var mconns []net.Conn
	for range 40 {
		if c, err := attacker.Dial("tcp", metricsAddr); err == nil {
			mconns = append(mconns, c)
		}
	}
	var refused atomic.Int32
	var wg sync.WaitGroup
	for _, c := range mconns { // a refused one is answered and closed at once; the others wait for a request
		wg.Go(func() {
			defer c.Close()
			c.SetReadDeadline(time.Now().Add(3 * time.Second))
			var ne net.Error
			if _, err := io.ReadAll(c); !errors.As(err, &ne) || !ne.Timeout() {
				refused.Add(1)
			}
		})
	}
	wg.Wait()
	if refused.Load() < 40-16 {
		t.Errorf("the metrics listener refused %d of 40 connections from one address; want at least %d", refused.Load(), 40-16)
	}
	if code := getStatus(t, "http://"+metricsAddr+"/metrics"); code != http.StatusOK {
		t.Errorf("/metrics from another address: HTTP %d", code)
	}
}

// idleAfter401 opens a connection from 127.0.0.3, reads its 401 and keeps it.
func idleAfter401(t *testing.T, url string) net.Conn {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.3")}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "GET /mcp HTTP/1.1\r\nHost: x\r\n\r\n")
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("without a token: HTTP %d", resp.StatusCode)
	}
	return c
}

// waitClosed waits up to d for the server to close c.
func waitClosed(c net.Conn, d time.Duration) error {
	c.SetReadDeadline(time.Now().Add(d))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("still open after %v", d)
	}
	return nil
}

func getStatus(t *testing.T, url string) int {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestHTTPSessionBounds: a tenant opens MCP sessions past
// PYBOX_MAX_MCP_SESSIONS and sends initialize requests with megabytes of
// parameters. Past the cap a new session is refused (429, naming the
// setting) before its body is read; a big initialize is refused (413); the
// server's memory stays flat; another tenant still connects; closing a
// session makes room again.
func TestHTTPSessionBounds(t *testing.T) {
	parallelTest(t)
	h := startHTTP(t, false, "PYBOX_MAX_MCP_SESSIONS=8")
	pid := h.cmd.Process.Pid
	_, _, rss0 := procStats(t, pid)
	big := strings.Repeat("x", 4<<20)
	bigInit := strings.Replace(initializeBody, `"name":"raw"`, `"name":"`+big+`"`, 1)
	for i := range 24 {
		if code, session := h.initialize(tokenA, bigInit); session != "" {
			t.Fatalf("initialize %d with 4 MiB of parameters: HTTP %d, a session was opened; want 413", i, code)
		}
	}
	var sessions []string
	refused := 0
	for i := range 20 {
		code, session := h.initialize(tokenA, initializeBody)
		switch {
		case session != "":
			sessions = append(sessions, session)
		case code == http.StatusTooManyRequests:
			refused++
		default:
			t.Fatalf("initialize %d: HTTP %d", i, code)
		}
	}
	if len(sessions) != 8 || refused != 12 {
		t.Errorf("20 initializes with a cap of 8: %d sessions, %d refused; want 8 and 12", len(sessions), refused)
	}
	_, _, rss := procStats(t, pid)
	t.Logf("server RSS: %d MiB before, %d MiB after 24 initializes of 4 MiB and 20 small ones", rss0>>10, rss>>10)
	if rss-rss0 > 64<<10 {
		t.Errorf("the server's memory grew by %d MiB during the flood; want under 64 MiB", (rss-rss0)>>10)
	}
	if code, body := h.rawPost(tokenA, "", "", initializeBody); code != http.StatusTooManyRequests || !strings.Contains(body, "--max-mcp-sessions") {
		t.Errorf("a session past the cap: HTTP %d %q; want 429 naming --max-mcp-sessions", code, body)
	}
	csB := h.connect(tokenB) // another tenant is not affected
	if _, err := csB.ListTools(t.Context(), nil); err != nil {
		t.Errorf("tenant b while a is at its cap: %v", err)
	}
	h.deleteSession(tokenA, sessions[0])
	if code, session := h.initialize(tokenA, initializeBody); session == "" {
		t.Errorf("after a session was closed: HTTP %d; want a new session", code)
	}
}

// initialize posts an initialize request and returns the session it opened.
func (h *httpServer) initialize(token, body string) (int, string) {
	return postInitialize(context.Background(), http.DefaultClient, h.url, token, body)
}

// postInitialize posts an initialize (with token's bearer header unless
// token is "") and returns the status and the session it opened; status 0:
// the server closed the connection (refused before reading the body).
func postInitialize(ctx context.Context, client *http.Client, url, token, body string) (int, string) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, ""
	}
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id")
}

func (h *httpServer) deleteSession(token, session string) {
	req, _ := http.NewRequest(http.MethodDelete, h.url+"/mcp", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Mcp-Session-Id", session)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		h.t.Fatalf("DELETE session: HTTP %d", resp.StatusCode)
	}
}
