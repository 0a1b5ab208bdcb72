package egress

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestTunnelServerName: a tunnel allowed for example.com carries a TLS
// handshake for example.com (in any case), not one for another name.
func TestTunnelServerName(t *testing.T) {
	r := newRig(t, nil)
	pool := x509.NewCertPool()
	pool.AddCert(r.tls.Certificate())
	handshake := func(sni string, verify bool) error {
		c, err := net.Dial("tcp", r.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(20 * time.Second))
		fmt.Fprintf(c, "CONNECT example.com:%d HTTP/1.1\r\n\r\n", r.tlsPort)
		br := bufio.NewReader(c)
		if resp, err := http.ReadResponse(br, &http.Request{Method: "CONNECT"}); err != nil || resp.StatusCode != 200 {
			t.Fatalf("CONNECT: %v %v", resp, err)
		}
		return tls.Client(c, &tls.Config{ServerName: sni, RootCAs: pool, InsecureSkipVerify: !verify}).Handshake()
	}
	if err := handshake("Example.COM", true); err != nil {
		t.Errorf("TLS for Example.COM: %v", err)
	}
	if err := handshake("evil.example", false); err == nil {
		t.Errorf("TLS for evil.example through a tunnel for example.com succeeded")
	}
	d := r.dest("example.com", r.tlsPort)
	if !strings.Contains(d.Reason, `cut: TLS server name "evil.example" is not example.com`) {
		t.Errorf("report entry %+v, want the cut", d)
	}
}
