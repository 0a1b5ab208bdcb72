package egress

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"testing"
	"time"
)

// BenchmarkHTTPSRequest measures one HTTPS request on a new connection
// (TCP, TLS handshake, GET, small response) directly and through the proxy,
// alternately, and reports the medians and their difference (added-µs).
func BenchmarkHTTPSRequest(b *testing.B) {
	r := newRig(b, nil)
	u := fmt.Sprintf("https://example.com:%d/", r.tlsPort)
	proxied := r.client()
	direct := directClient(r)
	var dt, pt []time.Duration
	for b.Loop() {
		dt = append(dt, timeGet(b, direct, u))
		pt = append(pt, timeGet(b, proxied, u))
	}
	d, p := median(dt), median(pt)
	b.ReportMetric(float64(d.Microseconds()), "direct-µs")
	b.ReportMetric(float64(p.Microseconds()), "proxy-µs")
	b.ReportMetric(float64((p - d).Microseconds()), "added-µs")
}

func median(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// BenchmarkDownload100MiB measures one 100 MiB HTTPS download through the
// proxy (and directly, for comparison).
func BenchmarkDownload100MiB(b *testing.B) {
	r := newRig(b, func(c *Config) { c.Limits.BytesIn = 1 << 50 })
	u := fmt.Sprintf("https://example.com:%d/bytes?n=%d", r.tlsPort, 100<<20)
	for _, c := range []struct {
		name string
		c    *http.Client
	}{{"proxy", r.client()}, {"direct", directClient(r)}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(100 << 20)
			for b.Loop() {
				timeGet(b, c.c, u)
			}
		})
	}
}

// directClient reaches the rig's HTTPS server without the proxy, by the
// same name.
func directClient(r *rig) *http.Client {
	pool := x509.NewCertPool()
	pool.AddCert(r.tls.Certificate())
	addr := fmt.Sprintf("127.0.0.1:%d", r.tlsPort)
	var d net.Dialer
	tr := &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: pool},
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return d.DialContext(ctx, network, addr)
		},
	}
	return &http.Client{Transport: tr, Timeout: time.Minute}
}

func timeGet(b *testing.B, c *http.Client, u string) time.Duration {
	start := time.Now()
	resp, err := c.Get(u)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		b.Fatal(err)
	}
	resp.Body.Close()
	return time.Since(start)
}
