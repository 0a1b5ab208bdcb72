package egress

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/textproto"
	"sync/atomic"
	"time"
)

// budget is a byte allowance shared by all connections of a run.
type budget struct{ left atomic.Int64 }

// take grants up to n bytes.
func (b *budget) take(n int) int {
	for {
		l := b.left.Load()
		g := min(int64(n), l)
		if g <= 0 {
			return 0
		}
		if b.left.CompareAndSwap(l, l-g) {
			return int(g)
		}
	}
}

func (b *budget) give(n int) {
	if n > 0 {
		b.left.Add(int64(n))
	}
}

// limitError ends a transfer that went over a byte limit.
type limitError struct{ what string }

func (e *limitError) Error() string { return e.what }

var errHeadTooLarge = errors.New("request head too large")

// clientReader reads a client connection: the request head from the raw
// connection under an absolute deadline, at most max bytes of it, recorded;
// the rest through body.
type clientReader struct {
	raw    net.Conn
	body   io.Reader
	left   int
	rec    []byte
	inHead bool
	over   bool
}

func newClientReader(c net.Conn, body io.Reader, max int) *clientReader {
	return &clientReader{raw: c, body: body, left: max, inHead: true}
}

func (r *clientReader) Read(b []byte) (int, error) {
	if !r.inHead {
		return r.body.Read(b)
	}
	if r.left <= 0 {
		r.over = true
		return 0, errHeadTooLarge
	}
	b = b[:min(len(b), r.left)]
	n, err := r.raw.Read(b)
	r.left -= n
	r.rec = append(r.rec, b[:n]...)
	return n, err
}

// endHead returns the Host header values of the head just read (net/http
// removes them from the request) and switches to the body.
func (r *clientReader) endHead() []string {
	r.inHead = false
	tp := textproto.NewReader(bufio.NewReader(bytes.NewReader(r.rec)))
	r.rec = nil
	if _, err := tp.ReadLine(); err != nil {
		return nil
	}
	h, err := tp.ReadMIMEHeader()
	if err != nil && len(h) == 0 {
		return nil
	}
	return h.Values("Host")
}

// activity is the time of the last byte moved on either side of a connection.
type activity struct {
	start time.Time
	last  atomic.Int64
}

func newActivity() *activity { return &activity{start: time.Now()} }

func (a *activity) touch() { a.last.Store(int64(time.Since(a.start))) }

func (a *activity) idleFor() time.Duration {
	return time.Since(a.start) - time.Duration(a.last.Load())
}

// idleConn ends a Read or Write after idle without a byte moving on either
// side (a download keeps its quiet upload side open).
type idleConn struct {
	net.Conn
	idle time.Duration
	act  *activity
}

func (c *idleConn) Read(b []byte) (int, error) {
	for {
		_ = c.Conn.SetReadDeadline(time.Now().Add(c.idle)) // fails only on a closed conn, which Read reports
		n, err := c.Conn.Read(b)
		if n > 0 {
			c.act.touch()
		}
		if n == 0 && isTimeout(err) && c.act.idleFor() < c.idle {
			continue
		}
		return n, err
	}
}

func (c *idleConn) Write(b []byte) (int, error) {
	_ = c.Conn.SetWriteDeadline(time.Now().Add(c.idle)) // as in Read
	n, err := c.Conn.Write(b)
	if n > 0 {
		c.act.touch()
	}
	return n, err
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// metered counts a destination connection's bytes against the run's budgets
// and the destination's totals, and cuts it at a limit.
type metered struct {
	net.Conn
	p     *Proxy
	d     *dest
	isCut atomic.Bool
}

func (c *metered) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	g := c.p.in.take(n)
	c.d.in.Add(int64(g))
	if g < n {
		return g, c.cut("the run's download limit (" + size(c.p.limits.BytesIn) + ") was reached")
	}
	return n, err
}

func (c *metered) Write(b []byte) (int, error) {
	g := c.p.out.take(len(b))
	n, err := c.Conn.Write(b[:g])
	c.p.out.give(g - n)
	c.d.out.Add(int64(n))
	if err == nil && n < len(b) {
		err = c.cut("the run's upload limit (" + size(c.p.limits.BytesOut) + ") was reached")
	}
	return n, err
}

// cut records, once, that a limit ended the transfer; net/http does not
// always pass the error on.
func (c *metered) cut(why string) error {
	if !c.isCut.Swap(true) {
		c.p.rep.cut(c.d, why)
		c.p.log.Info("egress transfer cut", "host", c.d.host, "port", c.d.port, "reason", why)
	}
	return &limitError{why}
}
