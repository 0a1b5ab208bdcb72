package egress

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"
)

// tlsRecordMax is the largest TLS record with its header: the client
// reader's buffer holds a whole ClientHello to read it in place.
const tlsRecordMax = 5 + 16384 + 256

var errHelloRead = errors.New("hello read")

// checkHello reads, without consuming, the TLS ClientHello a tunnel's
// client sends first, and refuses a server name (SNI) other than the host
// the tunnel was allowed for: with it a client would ask a shared front
// (a CDN) for another site. A client that does not start with a TLS
// handshake record speaks another protocol and is let through, as is one
// without a server name on a tunnel to an IP literal.
func checkHello(br *bufio.Reader, r request) error {
	first, err := br.Peek(1)
	if err != nil || first[0] != 0x16 {
		return nil // the relay sees the same end, or this is not TLS
	}
	var name string
	var seen bool
	cfg := &tls.Config{GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
		name, seen = h.ServerName, true
		return nil, errHelloRead
	}}
	_ = tls.Server(&peekConn{br: br}, cfg).Handshake() // always fails: the callback stops it once the hello is read
	switch {
	case !seen:
		return &limitError{"unreadable TLS ClientHello"}
	case name == "" && r.ip.IsValid():
		return nil
	}
	if n, err := normalizeName(name); err != nil || n != r.host {
		return &limitError{fmt.Sprintf("TLS server name %s is not %s", quote(name), r.host)}
	}
	return nil
}

// peekConn lets crypto/tls read the bytes buffered in br without consuming
// them; writes (a TLS alert) go nowhere.
type peekConn struct {
	br  *bufio.Reader
	off int
}

func (c *peekConn) Read(b []byte) (int, error) {
	if c.br.Buffered() <= c.off {
		if _, err := c.br.Peek(c.off + 1); err != nil {
			return 0, err // bufio.ErrBufferFull for a hello larger than the buffer
		}
	}
	p, _ := c.br.Peek(c.br.Buffered()) // what is buffered: no error
	n := copy(b, p[c.off:])
	c.off += n
	return n, nil
}

func (c *peekConn) Write(b []byte) (int, error)      { return len(b), nil }
func (c *peekConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c *peekConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c *peekConn) Close() error                     { return nil }
func (c *peekConn) SetDeadline(time.Time) error      { return nil }
func (c *peekConn) SetReadDeadline(time.Time) error  { return nil }
func (c *peekConn) SetWriteDeadline(time.Time) error { return nil }
