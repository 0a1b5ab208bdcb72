package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"time"
)

// request is what a client asked for.
type request struct {
	req  *http.Request
	host string     // normalised name, or the IP literal's canonical form
	ip   netip.Addr // valid for an IP literal
	port int

	socks     bool     // a SOCKS5 CONNECT
	authority string   // host[:port] as checked: normalised, the port only when the client gave one
	refusal   *refused // set when the request names its destination but is refused anyway
}

// refused is a refusal: an HTTP status and a reason for the client and report.
type refused struct {
	status int
	why    string
}

func (r *refused) Error() string { return r.why }

func (s *server) serveConn(ctx context.Context, c net.Conn) {
	p := s.p
	act := newActivity()
	client := &idleConn{Conn: c, idle: p.limits.IdleTimeout, act: act}
	br, r, ok := p.readRequest(c, client)
	if !ok {
		return
	}
	up, d, ref := s.open(ctx, r)
	if ref != nil {
		p.rep.refuse(r.host, r.port, ref.why)
		p.log.Info("egress destination refused", "host", r.host, "port", r.port, "reason", ref.why)
		answer(client, r, ref)
		return
	}
	defer s.untrack(up)
	upm := &metered{Conn: &idleConn{Conn: up, idle: p.limits.IdleTimeout, act: act}, p: p, d: d}
	gate := func() error {
		err := checkHello(br, r)
		if err != nil {
			p.rep.cut(d, err.Error())
			p.log.Info("egress tunnel cut", "host", r.host, "port", r.port, "reason", err.Error())
		}
		return err
	}
	var err error
	switch {
	case r.socks:
		err = tunnel(client, br, upm, socksReply(socksOK), gate)
	case r.req.Method == http.MethodConnect:
		err = tunnel(client, br, upm, []byte("HTTP/1.1 200 Connection established\r\n\r\n"), gate)
	default:
		err = forward(client, r, upm)
	}
	if err != nil {
		p.log.Debug("egress connection ended", "host", r.host, "port", r.port, "err", err)
	}
}

// readRequest reads a request head (HTTP, or a SOCKS5 handshake) within
// the head limits and finds its destination; false when it answered the
// client itself.
func (p *Proxy) readRequest(c net.Conn, client *idleConn) (*bufio.Reader, request, bool) {
	cr := newClientReader(c, client, p.limits.HeaderBytes)
	br := bufio.NewReaderSize(cr, tlsRecordMax)
	_ = c.SetReadDeadline(time.Now().Add(p.limits.HeaderTimeout)) // a failure shows as a read error
	var r request
	var err error
	if first, perr := br.Peek(1); perr == nil && first[0] == socksVersion {
		r, err = readSocks(br, client)
		cr.endHead()
	} else {
		r, err = readHTTP(br, cr)
	}
	var ref *refused
	switch {
	case errors.As(err, &ref):
		p.rep.drop()
		p.log.Info("egress request malformed", "reason", ref.why)
		answer(client, r, ref)
	case err != nil:
		p.badHead(client, cr, err, r.socks)
	}
	return br, r, err == nil
}

// readHTTP reads an HTTP request head.
func readHTTP(br *bufio.Reader, cr *clientReader) (request, error) {
	req, err := http.ReadRequest(br)
	if err != nil {
		return request{}, err
	}
	r, ref := parseRequest(req, cr.endHead())
	if ref != nil && r.host == "" {
		return r, ref
	}
	r.refusal = ref
	return r, nil
}

func (r request) hostPort() string {
	return net.JoinHostPort(r.host, strconv.Itoa(r.port))
}

// badHead answers a request head that could not be read, if the client is
// still there to read the answer.
func (p *Proxy) badHead(client net.Conn, cr *clientReader, err error, socks bool) {
	var status int
	var why string
	switch {
	case cr.over:
		status, why = http.StatusRequestHeaderFieldsTooLarge, fmt.Sprintf("request head larger than %d bytes", p.limits.HeaderBytes)
	case isTimeout(err):
		status, why = http.StatusRequestTimeout, fmt.Sprintf("request head not sent within %v", p.limits.HeaderTimeout)
	case errors.Is(err, io.EOF) && len(cr.rec) == 0:
		return // the client left without asking anything
	default:
		status, why = http.StatusBadRequest, "malformed request"
	}
	p.rep.drop()
	p.log.Info("egress request head refused", "reason", why, "err", err)
	answer(client, request{socks: socks}, &refused{status, why})
}

// open checks r and connects to a checked address of it.
func (s *server) open(ctx context.Context, r request) (net.Conn, *dest, *refused) {
	p := s.p
	if r.refusal != nil {
		return nil, nil, r.refusal
	}
	ctx, cancel := context.WithTimeout(ctx, p.limits.DialTimeout)
	defer cancel()
	addrs, ref := p.check(ctx, r)
	if ref != nil {
		return nil, nil, ref
	}
	up, err := p.connect(ctx, addrs, r.port)
	if err != nil {
		p.log.Info("egress connect failed", "host", r.host, "port", r.port, "err", err)
		return nil, nil, &refused{http.StatusBadGateway, "cannot connect"}
	}
	if !s.track(up) {
		return nil, nil, &refused{http.StatusServiceUnavailable, "the proxy is shutting down"}
	}
	return up, p.rep.allow(r.host, r.port), nil
}

// check applies the allowlist and the address rules, and returns the
// addresses to dial.
func (p *Proxy) check(ctx context.Context, r request) ([]netip.Addr, *refused) {
	if r.ip.IsValid() {
		if !p.allow.Allows(r.host, r.port) || !exempt(r.ip, p.addrs) {
			return nil, &refused{http.StatusForbidden, "an IP address, not a host name on the allowlist"}
		}
		return []netip.Addr{r.ip}, nil
	}
	if looksLikeIP(r.host) {
		return nil, &refused{http.StatusForbidden, "looks like an IP address, not a host name on the allowlist"}
	}
	if !p.allow.allowsName(r.host, r.port) {
		return nil, &refused{http.StatusForbidden, "not on the allowlist"}
	}
	addrs, err := p.res.LookupNetIP(ctx, "ip", r.host+".") // absolute: no search domains
	if err != nil || len(addrs) == 0 {
		p.log.Info("egress resolve failed", "host", r.host, "err", err)
		return nil, &refused{http.StatusBadGateway, "cannot resolve the name"}
	}
	own := p.own()
	for i, a := range addrs {
		a = a.WithZone("").Unmap()
		addrs[i] = a
		if exempt(a, p.addrs) {
			continue
		}
		if why := classify(a, own); why != "" {
			return nil, &refused{http.StatusForbidden, fmt.Sprintf("resolves to %s, %s", a, why)}
		}
	}
	return addrs, nil
}

// connect dials the checked addresses in turn, never the name.
func (p *Proxy) connect(ctx context.Context, addrs []netip.Addr, port int) (net.Conn, error) {
	var errs []error
	for _, a := range addrs {
		c, err := p.dial(ctx, "tcp", netip.AddrPortFrom(a, uint16(port)).String())
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, errors.Join(errs...)
}

// refusal is the whole HTTP response of a refusal; the reason is both in
// the status line (clients such as urllib3 show it for a failed CONNECT)
// and in the body.
func refusal(status int, hostPort, why string) string {
	msg := "pybox egress: " + why
	if hostPort != "" {
		msg = fmt.Sprintf("pybox egress: %s refused (%s)", hostPort, why)
	}
	return fmt.Sprintf("HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s\n",
		status, msg, len(msg)+1, msg)
}

// answer tells a client about a refusal in its protocol.
func answer(c net.Conn, r request, ref *refused) {
	hostPort := ""
	if r.host != "" {
		hostPort = r.hostPort()
	}
	if r.socks {
		_, _ = c.Write(socksReply(socksCode(ref.status))) // best effort: the client may have gone
		return
	}
	writeRefusal(c, ref.status, hostPort, ref.why)
	linger(c)
}

// linger half-closes c and reads what the client still sends (a request
// body), up to 1 MiB or two seconds, so that closing does not reset the
// connection before the client has read the refusal.
func linger(c net.Conn) {
	if closeWrite(c) != nil {
		return
	}
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second)) // a failure ends the read below at once
	_, _ = io.CopyN(io.Discard, c, 1<<20)                  // its end is all that matters
}

func writeRefusal(c net.Conn, status int, hostPort, why string) {
	_, _ = io.WriteString(c, refusal(status, hostPort, why)) // best effort: the client may have gone
}
