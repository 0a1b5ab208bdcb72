//go:build !windows

package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pybox-dev/pybox/internal/testenv"
)

// TestEgressThroughServer drives the real binary over MCP with an egress
// allowlist: a program reaches the allowed name (a server of the test on
// 127.0.0.1, mapped by the test-only resolver and explicitly allowed),
// is refused another, and the result carries the proxy's network line.
func TestEgressThroughServer(t *testing.T) {
	parallelTest(t)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintf(w, "hello %s", r.Host) }))
	defer up.Close()
	port := up.URL[strings.LastIndexByte(up.URL, ':')+1:]
	s := startServer(t, "PYBOX_EGRESS_ALLOW=api.test:"+port, "PYBOX_EGRESS_ALLOW_ADDRS=127.0.0.1",
		"PYBOX_EGRESS_TEST_HOSTS=api.test=127.0.0.1,other.test=127.0.0.1")
	code := fmt.Sprintf(`import urllib.request
print(urllib.request.urlopen("http://api.test:%[1]s/", timeout=20).read().decode())
try:
    urllib.request.urlopen("http://other.test:%[1]s/", timeout=20)
except Exception as e:
    print("refused:", e)
`, port)
	out, res := s.exec(map[string]any{"code": code})
	if out.ExitCode != 0 || !strings.HasPrefix(out.Stdout, "hello api.test:"+port+"\nrefused: HTTP Error 403") {
		t.Fatalf("exit %d stdout %q stderr %q", out.ExitCode, out.Stdout, out.Stderr)
	}
	for _, want := range []string{"network: ", "allowed api.test:" + port + " (1 connection,", "refused other.test:" + port + " (not on the allowlist)"} {
		if !strings.Contains(text(res), want) {
			t.Errorf("result text lacks %q:\n%s", want, text(res))
		}
	}
}

// TestEgressPerTenant: over HTTP with tokens, tenant a's own list (from
// PYBOX_TENANT_EGRESS) lets it reach api.test, tenant b (not listed, no
// server-wide list) has no network at all; /metrics counts a's traffic.
func TestEgressPerTenant(t *testing.T) {
	parallelTest(t)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintf(w, "hello %s", r.Host) }))
	defer up.Close()
	port := up.URL[strings.LastIndexByte(up.URL, ':')+1:]
	lists := filepath.Join(t.TempDir(), "egress")
	if err := os.WriteFile(lists, []byte("# per tenant\na api.test:"+port+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ml, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	metricsAddr := ml.Addr().String()
	ml.Close()
	h := startHTTP(t, false, "PYBOX_TENANT_EGRESS="+lists, "PYBOX_EGRESS_ALLOW_ADDRS=127.0.0.1",
		"PYBOX_EGRESS_TEST_HOSTS=api.test=127.0.0.1", "PYBOX_METRICS_ADDR="+metricsAddr)
	code := fmt.Sprintf(`import urllib.request
try:
    print(urllib.request.urlopen("http://api.test:%s/", timeout=20).read().decode())
except Exception as e:
    print("failed:", type(e).__name__)
`, port)
	_, ta := callOK(t, h.connect(tokenA), "execute_code", map[string]any{"code": code})
	_, tb := callOK(t, h.connect(tokenB), "execute_code", map[string]any{"code": code})
	if !strings.Contains(ta, "hello api.test:"+port) || !strings.Contains(ta, "network: allowed api.test:"+port) {
		t.Errorf("tenant a (allowlisted) got:\n%s", ta)
	}
	if !strings.Contains(tb, "failed: URLError") || strings.Contains(tb, "network:") {
		t.Errorf("tenant b (no list) got:\n%s", tb)
	}
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := `pybox_egress_connections_total{tenant="a",verdict="allowed"} 1`; !strings.Contains(string(body), want) {
		t.Errorf("/metrics lacks %q", want)
	}
}

// TestEgressPodman: the same allowlisted fetch on rootful Podman (the
// proxy's socket is a host file the container reaches through its mount).
func TestEgressPodman(t *testing.T) {
	pod, host := testenv.Podman(t)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintf(w, "hello %s", r.Host) }))
	defer up.Close()
	port := up.URL[strings.LastIndexByte(up.URL, ':')+1:]
	s := startServer(t, "DOCKER_HOST="+host, "PYBOX_EGRESS_ALLOW=api.test:"+port, "PYBOX_EGRESS_ALLOW_ADDRS=127.0.0.1",
		"PYBOX_EGRESS_TEST_HOSTS=api.test=127.0.0.1")
	s.eng = pod
	out, res := s.exec(map[string]any{"code": fmt.Sprintf(`import socket, urllib.request
print([n for _, n in socket.if_nameindex()], urllib.request.urlopen("http://api.test:%s/", timeout=20).read().decode())`, port)})
	if want := "['lo'] hello api.test:" + port + "\n"; out.Stdout != want || !strings.Contains(text(res), "network: allowed api.test:"+port) {
		t.Fatalf("on Podman: want stdout %q and a network line:\n%s", want, text(res))
	}
}
