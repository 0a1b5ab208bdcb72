package egress

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/proxy"
)

// socksClient reaches the rig's destinations through the proxy's SOCKS5
// side, the proxy resolving names (socks5h).
func (r *rig) socksClient() (*http.Client, proxy.ContextDialer) {
	d, err := proxy.SOCKS5("tcp", r.addr, nil, &net.Dialer{})
	if err != nil {
		r.t.Fatal(err)
	}
	cd := d.(proxy.ContextDialer)
	pool := x509.NewCertPool()
	pool.AddCert(r.tls.Certificate())
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		DialContext:       cd.DialContext,
		TLSClientConfig:   &tls.Config{RootCAs: pool},
		DisableKeepAlives: true,
	}}, cd
}

func TestSocks(t *testing.T) {
	r := newRig(t, nil)
	c, dialer := r.socksClient()
	resp, err := c.Get(fmt.Sprintf("https://example.com:%d/", r.tlsPort))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "hello 0" {
		t.Errorf("body %q", body)
	}
	for _, target := range []string{
		"example.org:443",                            // not on the list
		fmt.Sprintf("127.0.0.1:%d", r.tlsPort),       // IP literal
		fmt.Sprintf("meta.pybox.test:%d", r.tlsPort), // metadata
		fmt.Sprintf("example.com:%d", r.tlsPort+1),   // port
	} {
		conn, err := dialer.DialContext(context.Background(), "tcp", target)
		if err == nil {
			conn.Close()
			t.Errorf("SOCKS5 CONNECT %s succeeded", target)
		} else if !strings.Contains(err.Error(), "not allowed") {
			t.Errorf("SOCKS5 CONNECT %s: %v, want not allowed by ruleset", target, err)
		}
	}
	if got, want := r.dials(), []string{fmt.Sprintf("127.0.0.1:%d", r.tlsPort)}; !equal(got, want) {
		t.Errorf("dialed %v, want %v", got, want)
	}
	if s := r.p.Report().String(); !strings.Contains(s, "refused example.org:443 (not on the allowlist)") ||
		!strings.Contains(s, fmt.Sprintf("allowed example.com:%d (1 connection", r.tlsPort)) {
		t.Errorf("report %q", s)
	}
}

// TestServeUnix serves on a unix socket, as pybox does for containers.
func TestServeUnix(t *testing.T) {
	r := newRig(t, nil)
	dir, err := os.MkdirTemp("", "egress") // short: socket paths are limited to ~100 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "s")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Skipf("no unix sockets here: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.p.Serve(ctx, l) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	// The proxy's name is a placeholder: every dial goes to the socket.
	c := r.client()
	c.Transport.(*http.Transport).DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}
	resp, err := c.Get(fmt.Sprintf("https://example.com:%d/", r.tlsPort))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("status %d", resp.StatusCode)
	}
}
