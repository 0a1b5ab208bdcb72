package egress

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
)

// SOCKS5 (RFC 1928), CONNECT only, without authentication: for TCP that
// is not HTTP (ALL_PROXY=socks5h://...). The client names the host
// (socks5h) or an IP literal, checked as an HTTP request's would be.
const (
	socksVersion   = 5
	socksNoAuth    = 0
	socksNoMethod  = 0xff
	socksConnect   = 1
	socksOK        = 0
	socksFailure   = 1
	socksNotAllow  = 2
	socksUnreach   = 4
	socksNoCommand = 7
)

// readSocks reads a SOCKS5 greeting and CONNECT request, answering the
// greeting on w.
func readSocks(br *bufio.Reader, w io.Writer) (request, error) {
	r := request{socks: true}
	var hdr [2]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil {
		return r, err
	}
	methods := make([]byte, hdr[1])
	if _, err := io.ReadFull(br, methods); err != nil {
		return r, err
	}
	if !slices.Contains(methods, socksNoAuth) {
		_, _ = w.Write([]byte{socksVersion, socksNoMethod}) // best effort: the refusal below ends the connection
		return r, &refused{http.StatusBadRequest, "SOCKS5 without authentication only"}
	}
	if _, err := w.Write([]byte{socksVersion, socksNoAuth}); err != nil {
		return r, err
	}
	var req [4]byte
	if _, err := io.ReadFull(br, req[:]); err != nil {
		return r, err
	}
	if req[0] != socksVersion || req[1] != socksConnect {
		return r, &refused{http.StatusNotImplemented, "SOCKS5 CONNECT only"}
	}
	host, err := socksHost(br, req[3])
	if err != nil {
		return r, err
	}
	var port [2]byte
	if _, err := io.ReadFull(br, port[:]); err != nil {
		return r, err
	}
	p, ref := parseAuthority(net.JoinHostPort(host, strconv.Itoa(int(binary.BigEndian.Uint16(port[:])))), 0)
	if ref != nil {
		return r, ref
	}
	p.socks = true
	return p, nil
}

// socksHost reads a SOCKS5 address of type atyp.
func socksHost(br *bufio.Reader, atyp byte) (string, error) {
	var n int
	switch atyp {
	case 1:
		n = 4
	case 4:
		n = 16
	case 3:
		l, err := br.ReadByte()
		if err != nil {
			return "", err
		}
		n = int(l)
	default:
		return "", &refused{http.StatusNotImplemented, "unknown SOCKS5 address type"}
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(br, b); err != nil {
		return "", err
	}
	if atyp == 3 {
		return string(b), nil
	}
	a, _ := netip.AddrFromSlice(b)
	return a.String(), nil
}

// socksReply is a reply with an empty bound address.
func socksReply(code byte) []byte {
	return []byte{socksVersion, code, 0, 1, 0, 0, 0, 0, 0, 0}
}

// socksCode maps a refusal's HTTP status to a SOCKS5 reply code.
func socksCode(status int) byte {
	switch status {
	case http.StatusForbidden:
		return socksNotAllow
	case http.StatusBadGateway:
		return socksUnreach
	case http.StatusNotImplemented:
		return socksNoCommand
	}
	return socksFailure
}
