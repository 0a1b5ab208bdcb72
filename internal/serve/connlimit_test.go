package serve

import (
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"
)

// TestConnLimit: past the total or a client's bound a connection is
// answered 503 and closed; closing an admitted one makes room again.
func TestConnLimit(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := newConnLimit(ln, 3, 2, slog.New(slog.DiscardHandler))
	defer l.Close()
	accepted := make(chan net.Conn, 10)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	dial := func(ip string) net.Conn {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
		c, err := d.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	refused := func(c net.Conn) bool {
		c.SetReadDeadline(time.Now().Add(time.Second))
		b, _ := io.ReadAll(c)
		return strings.HasPrefix(string(b), "HTTP/1.1 503")
	}
	dial("127.0.0.2")
	dial("127.0.0.2")
	srvA1, srvA2 := <-accepted, <-accepted
	if a3 := dial("127.0.0.2"); !refused(a3) {
		t.Errorf("a third connection from one address (bound 2) was not refused")
	}
	dial("127.0.0.3")
	<-accepted
	if b2 := dial("127.0.0.4"); !refused(b2) {
		t.Errorf("a fourth connection in total (bound 3) was not refused")
	}
	srvA1.Close()
	srvA1.Close() // twice: the place is given back once
	dial("127.0.0.2")
	select {
	case <-accepted:
	case <-time.After(5 * time.Second):
		t.Fatal("after a connection closed, a new one from its address was not accepted")
	}
	if c := dial("127.0.0.5"); !refused(c) {
		t.Errorf("the total bound was given back twice for one connection")
	}
	srvA2.Close()
}
