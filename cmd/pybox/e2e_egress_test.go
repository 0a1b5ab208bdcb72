//go:build !windows

package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestEgressThroughServer drives the real binary over MCP with an egress
// allowlist: a program reaches the allowed name (a server of the test on
// 127.0.0.1, mapped by the test-only resolver and explicitly allowed),
// is refused another, and the result carries the proxy's network line.
func TestEgressThroughServer(t *testing.T) {
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
