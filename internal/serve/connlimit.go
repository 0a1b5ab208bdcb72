package serve

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/pybox-dev/pybox/internal/app"
)

// connLimit bounds the connections a listener keeps open: in total, and
// per client address. It is checked when a connection is accepted, before
// a byte of it is read (so before authentication): a connection past a
// bound gets a short 503 and is closed at once. With the server's idle and
// read timeouts, a client that opens connections and leaves them idle
// holds at most perClient descriptors, and the others are still served.
type connLimit struct {
	net.Listener
	total, perClient int
	log              *slog.Logger

	mu     sync.Mutex
	open   int
	byHost map[string]int
}

func newConnLimit(ln net.Listener, total, perClient int, log *slog.Logger) *connLimit {
	return &connLimit{Listener: ln, total: total, perClient: perClient, log: log, byHost: map[string]int{}}
}

// refusal is what a connection past a bound reads before it is closed.
const refusalText = "too many open connections from this address or in total; try again later\n"

var refusal = []byte("HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nConnection: close\r\n" +
	"Content-Length: " + strconv.Itoa(len(refusalText)) + "\r\n\r\n" + refusalText)

// Accept returns the next connection within the bounds; the others are
// answered and closed here.
func (l *connLimit) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		host := clientHost(c.RemoteAddr())
		if l.admit(host) {
			return &limitedConn{Conn: c, l: l, host: host}, nil
		}
		// A new socket's send buffer is empty: this write does not block
		// (the deadline is there in case it would).
		c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
		c.Write(refusal) // best effort: the connection is refused either way
		c.Close()
		l.log.Warn("connection refused: too many open connections", "remote", host,
			"max_connections", l.total, "max_connections_per_client", l.perClient)
	}
}

func (l *connLimit) admit(host string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open >= l.total || l.byHost[host] >= l.perClient {
		return false
	}
	l.open++
	l.byHost[host]++
	return true
}

func (l *connLimit) release(host string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open--
	if l.byHost[host]--; l.byHost[host] <= 0 {
		delete(l.byHost, host)
	}
}

// clientHost is a connection's client address without its port.
func clientHost(a net.Addr) string {
	if tcp, ok := a.(*net.TCPAddr); ok {
		return tcp.IP.String()
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}

// limitedConn gives its place back when it is closed (once).
type limitedConn struct {
	net.Conn
	l    *connLimit
	host string
	once sync.Once
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c.host) })
	return err
}

// readTimeout bounds reading one request, headers and body (a client
// sending a body slowly). Writes have no timeout: a long tool call's
// answer and the event streams (GET) take as long as they take.
const readTimeout = 2 * time.Minute

// listen listens on addr with c's connection bounds.
func listen(c *app.Config, addr string, log *slog.Logger) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return newConnLimit(ln, c.MaxConns, c.MaxClientConns, log), nil
}

// httpServer is an HTTP server of h with c's timeouts: a request's headers
// within 10 s, the whole request within readTimeout, and a kept-alive
// connection closed after c.HTTPIdle without a request.
func httpServer(c *app.Config, h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: readTimeout, IdleTimeout: c.HTTPIdle}
}

// checkConnSettings validates the HTTP connection settings.
func checkConnSettings(c *app.Config) error {
	switch {
	case c.MaxConns < 1 || c.MaxClientConns < 1:
		return errors.New("max connections and max connections per client must be at least 1")
	case c.MaxClientConns > c.MaxConns:
		return fmt.Errorf("max connections per client (%d) is above max connections (%d)", c.MaxClientConns, c.MaxConns)
	case c.HTTPIdle < time.Second:
		return errors.New("http idle timeout must be at least 1s")
	case c.MaxMCPSessions < 1:
		return errors.New("max MCP sessions must be at least 1")
	}
	return nil
}
