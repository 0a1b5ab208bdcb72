package egress

import (
	"io"
	"net"
	"strings"
	"sync"
	"testing"
)

// FuzzRequestHead feeds arbitrary bytes to the head reader: it must not
// panic, and a destination it accepts is in canonical form.
func FuzzRequestHead(f *testing.F) {
	for _, s := range []string{
		"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com\r\n\r\n",
		"GET http://a.example.com/x HTTP/1.1\r\nHost: a.example.com\r\n\r\n",
		"GET http://[::1]:80/ HTTP/1.0\r\n\r\n",
		"\x05\x01\x00\x05\x01\x00\x03\x0bexample.com\x01\xbb",
		"\x05\x01\x00\x05\x010\x03\v00\x800000000000", // invalid UTF-8 made an xn-- name that is not valid IDNA
		"\x05\x01\x00\x05\x01\x00\x04\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x50",
	} {
		f.Add([]byte(s))
	}
	p, err := New(Config{Limits: Limits{HeaderBytes: 2048}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		client, server := net.Pipe()
		var wg sync.WaitGroup
		wg.Go(func() {
			client.Write(data) // may fail once the server stops reading
			client.Close()
		})
		wg.Go(func() { io.Copy(io.Discard, client) })
		_, r, ok := p.readRequest(server, &idleConn{Conn: server, idle: p.limits.IdleTimeout, act: newActivity()})
		server.Close()
		wg.Wait()
		if !ok {
			return
		}
		if r.ip.IsValid() {
			if r.host != r.ip.String() {
				t.Errorf("IP literal %v kept as %q", r.ip, r.host)
			}
		} else if n, err := normalizeName(r.host); err != nil || n != r.host || strings.ContainsAny(r.host, ":[]") {
			t.Errorf("accepted host %q is not canonical (%q, %v)", r.host, n, err)
		}
		if r.port < 1 || r.port > 65535 {
			t.Errorf("accepted port %d", r.port)
		}
	})
}

// FuzzAllowlist: parsing and matching never panic, and a host matches
// exactly when its canonical form does.
func FuzzAllowlist(f *testing.F) {
	f.Add("*.example.com:8443", "a.B.example.com.", 8443)
	f.Add("bücher.example", "xn--bcher-kva.example", 443)
	f.Add("[2001:db8::1]:80", "2001:db8::1", 80)
	f.Fuzz(func(t *testing.T, entry, host string, port int) {
		a, err := ParseAllowlist([]string{entry})
		if err != nil {
			return
		}
		got := a.Allows(host, port)
		if _, isIP := parseIP(host); isIP {
			return
		}
		n, err := normalizeName(host)
		if err != nil {
			if got {
				t.Errorf("%q allows %q, which has no canonical form", entry, host)
			}
			return
		}
		if again := a.Allows(n, port); again != got {
			t.Errorf("%q: Allows(%q)=%v but Allows(%q)=%v", entry, host, got, n, again)
		}
	})
}
