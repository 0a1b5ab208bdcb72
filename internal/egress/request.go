package egress

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// parseRequest finds the destination of a request: the CONNECT authority
// or the absolute URL's host. A Host header must name the same host and
// port. hosts are the request's Host header values. A refusal with a
// destination (r.host set) is a refused destination, without one a
// malformed request.
func parseRequest(req *http.Request, hosts []string) (request, *refused) {
	authority, defPort, ref := authorityOf(req)
	if ref != nil {
		return request{}, ref
	}
	r, ref := parseAuthority(authority, defPort)
	if ref != nil {
		return request{}, ref
	}
	r.req = req
	hostPort := defPort
	if req.Method == http.MethodConnect {
		hostPort = r.port // "Host: example.com" on a CONNECT to example.com:443 is the same host
	}
	for _, hh := range hosts {
		h, ref := parseAuthority(hh, hostPort)
		if ref != nil || h.host != r.host || h.port != r.port || len(hosts) > 1 {
			return r, &refused{http.StatusForbidden, fmt.Sprintf("the Host header %s names another host", quote(hh))}
		}
	}
	return r, nil
}

func bad(why string) *refused { return &refused{http.StatusBadRequest, why} }

// authorityOf returns the request target's host[:port] and the port it
// implies when it names none (0: it must name one).
func authorityOf(req *http.Request) (string, int, *refused) {
	if req.Method == http.MethodConnect {
		if req.URL.Host == "" || req.URL.Host != req.RequestURI {
			return "", 0, bad("CONNECT needs a host:port target")
		}
		return req.URL.Host, 0, nil
	}
	u := req.URL
	switch {
	case u.Scheme == "https":
		return "", 0, bad("send https requests through CONNECT")
	case u.Scheme != "http" || u.Host == "":
		return "", 0, bad("a request through this proxy needs an absolute http:// URL")
	case u.User != nil:
		return "", 0, bad("credentials in the URL are not forwarded")
	}
	return u.Host, 80, nil
}

// parseAuthority normalises host[:port]; defPort applies when the port is
// absent (0: a port is required).
func parseAuthority(s string, defPort int) (request, *refused) {
	host, port, err := splitHostPort(s)
	if err != nil {
		return request{}, bad(err.Error())
	}
	explicit := port != 0
	if !explicit {
		if defPort == 0 {
			return request{}, bad("the target needs a port")
		}
		port = defPort
	}
	r := request{port: port}
	if ip, ok := parseIP(host); ok {
		r.host, r.ip = ip.String(), ip
	} else if strings.HasPrefix(host, "[") {
		return request{}, bad("invalid IP address " + quote(host))
	} else if r.host, err = normalizeName(host); err != nil {
		return request{}, bad(err.Error())
	}
	r.authority = r.hostPort()
	if !explicit {
		r.authority = strings.TrimSuffix(r.authority, ":"+strconv.Itoa(port))
	}
	return r, nil
}
