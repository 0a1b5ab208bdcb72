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
