package egress

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestAllowedHTTPS(t *testing.T) {
	r := newRig(t, nil)
	req, _ := http.NewRequest("GET", fmt.Sprintf("https://example.com:%d/", r.tlsPort), nil)
	r.wantOK(req, "hello 0")
	if got, want := r.dials(), []string{fmt.Sprintf("127.0.0.1:%d", r.tlsPort)}; !equal(got, want) {
		t.Errorf("dialed %v, want %v (the checked address, never the name)", got, want)
	}
	d := r.dest("example.com", r.tlsPort)
	if !d.Allowed || d.Conns != 1 || d.BytesIn < 500 || d.BytesOut < 100 {
		t.Errorf("report entry %+v, want allowed, 1 connection, the TLS bytes counted", d)
	}
	if s := r.p.Report().String(); !strings.HasPrefix(s, fmt.Sprintf("allowed example.com:%d (1 connection, ", r.tlsPort)) {
		t.Errorf("report %q", s)
	}
}

func TestAllowedHTTP(t *testing.T) {
	r := newRig(t, nil)
	req, _ := http.NewRequest("POST", fmt.Sprintf("http://Plain.PYBOX.test.:%d/p/a?q=1", r.httpPort), strings.NewReader("12345"))
	req.Header.Set("Connection", "X-Secret")
	req.Header.Set("X-Secret", "hop")
	req.Header.Set("Proxy-Authorization", "Basic abc")
	req.Header.Set("X-Kept", "yes")
	r.wantOK(req, "hello 5")
	got := <-r.seen
	if got.RequestURI != "/p/a?q=1" || got.Header.Get("X-Kept") != "yes" {
		t.Errorf("destination got %q with %v, want origin-form /p/a?q=1 and X-Kept", got.RequestURI, got.Header)
	}
	if want := fmt.Sprintf("plain.pybox.test:%d", r.httpPort); got.Host != want {
		t.Errorf("destination got Host %q, want the checked form %q", got.Host, want)
	}
	for _, h := range []string{"X-Secret", "Proxy-Authorization", "Proxy-Connection"} {
		if v := got.Header.Get(h); v != "" {
			t.Errorf("destination got hop-by-hop header %s: %q", h, v)
		}
	}
	if d := r.dest("plain.pybox.test", r.httpPort); !d.Allowed || d.Conns != 1 || d.BytesOut == 0 || d.BytesIn == 0 {
		t.Errorf("report entry %+v", d)
	}
}

// TestRefused drives the checks with raw requests; none may reach a
// destination or even dial one.
func TestRefused(t *testing.T) {
	r := newRig(t, nil)
	tp, hp := r.tlsPort, r.httpPort
	cases := []struct {
		name, req string
		status    int
		host, why string
	}{
		{"not on the list", "CONNECT example.org:443 HTTP/1.1\r\nHost: example.org:443\r\n\r\n", 403, "example.org:443", "not on the allowlist"},
		{"port not on the list", fmt.Sprintf("CONNECT example.com:%d HTTP/1.1\r\n\r\n", tp+1), 403, "", "not on the allowlist"},
		{"IP literal", fmt.Sprintf("CONNECT 127.0.0.1:%d HTTP/1.1\r\n\r\n", tp), 403, "", "an IP address"},
		{"mapped IP literal", fmt.Sprintf("CONNECT [::ffff:127.0.0.1]:%d HTTP/1.1\r\n\r\n", tp), 403, "", "an IP address"},
		{"decimal IP", fmt.Sprintf("CONNECT 2130706433:%d HTTP/1.1\r\n\r\n", tp), 403, "", "looks like an IP address"},
		{"metadata", fmt.Sprintf("CONNECT meta.pybox.test:%d HTTP/1.1\r\n\r\n", tp), 403, "", "resolves to 169.254.169.254, a link-local address (cloud metadata)"},
		{"mapped metadata", fmt.Sprintf("CONNECT mapped.pybox.test:%d HTTP/1.1\r\n\r\n", tp), 403, "", "resolves to 169.254.169.254, a link-local"},
		{"host's own", fmt.Sprintf("CONNECT own.pybox.test:%d HTTP/1.1\r\n\r\n", tp), 403, "", "this host's own address"},
		{"one private answer", fmt.Sprintf("CONNECT mixed.pybox.test:%d HTTP/1.1\r\n\r\n", tp), 403, "", "resolves to 10.1.2.3, a private address"},
		{"unknown name", fmt.Sprintf("CONNECT nowhere.pybox.test:%d HTTP/1.1\r\n\r\n", tp), 502, "", "cannot resolve"},
		{"Host header smuggling", fmt.Sprintf("GET http://plain.pybox.test:%d/ HTTP/1.1\r\nHost: example.org\r\n\r\n", hp), 403, "", "the Host header \"example.org\" names another host"},
		{"Host header on CONNECT", fmt.Sprintf("CONNECT example.com:%d HTTP/1.1\r\nHost: example.org:443\r\n\r\n", tp), 403, "", "names another host"},
		{"absolute URL for another host", fmt.Sprintf("GET http://example.org/ HTTP/1.1\r\nHost: plain.pybox.test:%d\r\n\r\n", hp), 403, "", "names another host"},
		{"absolute URL not on the list", "GET http://example.org/ HTTP/1.1\r\nHost: example.org\r\n\r\n", 403, "example.org:80", "not on the allowlist"},
		{"userinfo confusion", fmt.Sprintf("GET http://plain.pybox.test:%d@example.org/ HTTP/1.1\r\n\r\n", hp), 400, "", "credentials in the URL"},
		{"Host header without the CONNECT port, other host", fmt.Sprintf("CONNECT example.com:%d HTTP/1.1\r\nHost: example.org\r\n\r\n", tp), 403, "", "names another host"},
		{"two Host headers", fmt.Sprintf("GET http://plain.pybox.test:%d/ HTTP/1.1\r\nHost: plain.pybox.test:%d\r\nHost: example.org\r\n\r\n", hp, hp), 400, "", "malformed request"},
		{"IPv6 zone", fmt.Sprintf("CONNECT [fe80::1%%25eth0]:%d HTTP/1.1\r\n\r\n", tp), 400, "", "CONNECT needs a host:port target"},
		{"origin-form", fmt.Sprintf("GET / HTTP/1.1\r\nHost: plain.pybox.test:%d\r\n\r\n", hp), 400, "", "needs an absolute http:// URL"},
		{"https without CONNECT", fmt.Sprintf("GET https://example.com:%d/ HTTP/1.1\r\n\r\n", tp), 400, "", "through CONNECT"},
		{"CONNECT without a port", "CONNECT example.com HTTP/1.1\r\n\r\n", 400, "", "needs a port"},
		{"garbage", "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", 400, "", "malformed request"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, body := r.raw(c.req)
			if resp.StatusCode != c.status || !strings.Contains(body, c.why) || !strings.Contains(resp.Status, c.why) {
				t.Errorf("got %q %q, want %d and %q in both", resp.Status, body, c.status, c.why)
			}
			if c.host != "" && !strings.Contains(body, "pybox egress: "+c.host+" refused") {
				t.Errorf("body %q does not name %s", body, c.host)
			}
		})
	}
	if d := r.dials(); len(d) != 0 {
		t.Errorf("the proxy dialed %v for refused requests", d)
	}
	if len(r.seen) != 0 {
		t.Errorf("%d refused requests reached a destination", len(r.seen))
	}
	rep := r.p.Report()
	if !strings.Contains(rep.String(), "refused example.org:443 (not on the allowlist)") {
		t.Errorf("report %q", rep)
	}
}

// TestRefusedLoopbackWithoutAllowAddrs: the names the rig allows resolve
// to 127.0.0.1, refused unless the operator names it.
func TestRefusedLoopbackWithoutAllowAddrs(t *testing.T) {
	r := newRig(t, func(c *Config) { c.AllowAddrs = nil })
	for _, u := range []string{fmt.Sprintf("https://example.com:%d/", r.tlsPort), fmt.Sprintf("http://plain.pybox.test:%d/", r.httpPort)} {
		resp, err := r.client().Get(u)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 403 || !strings.Contains(string(body), "resolves to 127.0.0.1, a loopback address") {
				t.Errorf("%s: got %d %q, want 403 naming the loopback address", u, resp.StatusCode, body)
			}
		} else if !strings.Contains(err.Error(), "a loopback address") {
			t.Errorf("%s: %v, want a refusal naming the loopback address", u, err)
		}
	}
	if d := r.dials(); len(d) != 0 {
		t.Errorf("dialed %v", d)
	}
	want := fmt.Sprintf("refused example.com:%d (resolves to 127.0.0.1, a loopback address)", r.tlsPort)
	if s := r.p.Report().String(); !strings.Contains(s, want) {
		t.Errorf("report %q, want %q", s, want)
	}
}

func TestOverlongHead(t *testing.T) {
	r := newRig(t, func(c *Config) { c.Limits.HeaderBytes = 4096 })
	head := func(pad int) string {
		return fmt.Sprintf("GET http://plain.pybox.test:%d/ HTTP/1.1\r\nX-Pad: %s\r\n\r\n", r.httpPort, strings.Repeat("a", pad))
	}
	if resp, body := r.raw(head(3000)); resp.StatusCode != 200 {
		t.Fatalf("a head under the limit: %d %q", resp.StatusCode, body)
	}
	resp, body := r.raw(head(8000))
	if resp.StatusCode != 431 || !strings.Contains(body, "request head larger than 4096 bytes") {
		t.Errorf("got %d %q, want 431", resp.StatusCode, body)
	}
	if n := r.p.Report().Dropped; n != 1 {
		t.Errorf("dropped %d, want 1", n)
	}
}

// TestConnectHostWithoutPort: a CONNECT's Host header may leave out the port.
func TestConnectHostWithoutPort(t *testing.T) {
	r := newRig(t, nil)
	c, err := net.Dial("tcp", r.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "CONNECT example.com:%d HTTP/1.1\r\nHost: EXAMPLE.com\r\n\r\n", r.tlsPort)
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: "CONNECT"})
	if err != nil || resp.StatusCode != 200 {
		t.Errorf("CONNECT with Host: EXAMPLE.com: %v %v", resp, err)
	}
}

func equal(a, b []string) bool { return strings.Join(a, "\n") == strings.Join(b, "\n") }

// TestRefusedUpload: a client that sends its whole body before reading
// (as Python's http.client does) gets the refusal, not a reset.
func TestRefusedUpload(t *testing.T) {
	r := newRig(t, nil)
	c, err := net.Dial("tcp", r.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	const n = 512 << 10
	fmt.Fprintf(c, "POST http://example.org/ HTTP/1.1\r\nHost: example.org\r\nContent-Length: %d\r\n\r\n", n)
	if _, err := c.Write(make([]byte, n)); err != nil {
		t.Fatalf("sending the body: %v", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != 403 {
		t.Errorf("got %v %v, want the 403", resp, err)
	}
}
