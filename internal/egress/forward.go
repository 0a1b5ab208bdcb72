package egress

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"strings"
)

// respHeadMax bounds a destination's response head, and maxInterim the
// 1xx responses before the final one.
const (
	respHeadMax = 256 << 10
	maxInterim  = 8
)

// hopByHop are the headers that concern one connection, not the request.
var hopByHop = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// stripHopByHop removes hop-by-hop headers, the ones Connection names, and
// every Proxy-* header.
func stripHopByHop(h http.Header) {
	for _, v := range h["Connection"] {
		for _, name := range strings.Split(v, ",") {
			h.Del(textproto.TrimString(name))
		}
	}
	for _, name := range hopByHop {
		h.Del(name)
	}
	for name := range h {
		if strings.HasPrefix(name, "Proxy-") {
			delete(h, name)
		}
	}
}

// forward sends one plain HTTP request to up in origin-form and relays the
// response; the client connection is closed after it.
func forward(client net.Conn, r request, up net.Conn) error {
	req := r.req
	stripHopByHop(req.Header)
	if strings.EqualFold(req.Header.Get("Expect"), "100-continue") {
		req.Header.Del("Expect")
		if _, err := io.WriteString(client, "HTTP/1.1 100 Continue\r\n\r\n"); err != nil {
			return err
		}
	}
	if _, ok := req.Header["User-Agent"]; !ok {
		req.Header["User-Agent"] = []string{""} // net/http would add its own
	}
	req.RequestURI = ""
	req.Host, req.URL.Host = r.authority, r.authority // what was checked, in the form checked
	req.Close = true
	if err := req.Write(up); err != nil {
		return fmt.Errorf("sending the request: %w", err)
	}
	resp, err := readResponse(up, req)
	if err != nil {
		writeRefusal(client, http.StatusBadGateway, "", "no valid response from the destination")
		return err
	}
	defer resp.Body.Close()
	stripHopByHop(resp.Header)
	resp.Close = true
	return resp.Write(client)
}

// readResponse reads the final response to req, skipping 1xx ones, with
// the head bounded by respHeadMax.
func readResponse(up net.Conn, req *http.Request) (*http.Response, error) {
	lim := &headLimit{r: up, left: respHeadMax}
	br := bufio.NewReader(lim)
	for range maxInterim + 1 {
		resp, err := http.ReadResponse(br, req)
		if err != nil {
			return nil, fmt.Errorf("reading the response: %w", err)
		}
		if resp.StatusCode == http.StatusSwitchingProtocols {
			return nil, fmt.Errorf("unasked protocol switch")
		}
		if resp.StatusCode >= 200 {
			lim.left = -1
			return resp, nil
		}
		lim.left = respHeadMax
	}
	return nil, fmt.Errorf("more than %d interim (1xx) responses", maxInterim)
}

// headLimit reads at most left bytes while left >= 0.
type headLimit struct {
	r    io.Reader
	left int
}

func (h *headLimit) Read(b []byte) (int, error) {
	if h.left < 0 {
		return h.r.Read(b)
	}
	if h.left == 0 {
		return 0, fmt.Errorf("response head larger than %d bytes", respHeadMax)
	}
	n, err := h.r.Read(b[:min(len(b), h.left)])
	h.left -= n
	return n, err
}
