//go:build !windows

package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pybox-dev/pybox/sandbox"
)

// TestHTTPTokensReload: an edit of the tokens file that removes tenant a
// and also has a broken line still revokes a's token at SIGHUP: the valid
// lines apply, the broken one is refused and named in the log. Removing
// tenant a ends its MCP sessions, its sandbox session and its containers;
// tenant b and its session are untouched.
func TestHTTPTokensReload(t *testing.T) {
	parallelTest(t)
	h := startHTTP(t, false)
	a, b := h.connect(tokenA), h.connect(tokenB)
	if res, out := callOK(t, a, "execute_code", map[string]any{"code": "x = 1", "session_id": "a-live"}); res.IsError {
		t.Fatalf("tenant a's session: %s", out)
	}
	if res, out := callOK(t, b, "execute_code", map[string]any{"code": "y = 2", "session_id": "b-live"}); res.IsError {
		t.Fatalf("tenant b's session: %s", out)
	}
	if len(h.tenantContainers("a")) == 0 {
		t.Fatal("tenant a has no container before the reload")
	}
	// a's line is gone; a line is broken (a short token); b stays.
	os.WriteFile(h.tokens, []byte("b "+tokenB+"\nc short\n"), 0o600)
	h.cmd.Process.Signal(syscall.SIGHUP)
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, _ := h.rawPost(tokenA, "", "", initializeBody)
		left := h.tenantContainers("a")
		if code == http.StatusUnauthorized && len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("30 s after the reload: tenant a's token gets HTTP %d (want 401); %d of its containers are left", code, len(left))
		}
		time.Sleep(200 * time.Millisecond)
	}
	if _, ok := h.stderr.Await("line 2", "broken line is refused"); !ok {
		t.Errorf("the broken line is not named in the log")
	}
	if _, err := a.ListTools(t.Context(), nil); err == nil {
		t.Errorf("tenant a's MCP session still answers after a was removed")
	}
	if _, out := callOK(t, b, "execute_code", map[string]any{"code": "print(y)", "session_id": "b-live"}); !strings.Contains(out, "2") {
		t.Errorf("tenant b's session after the reload: %s", out)
	}
}

// tenantContainers lists the server's containers of one tenant (by its
// lease, in the tenant's state directory).
func (h *httpServer) tenantContainers(tenant string) []string {
	dir := filepath.Join(h.state, "tenants", tenant) + "/"
	var out []string
	for _, c := range h.containers() {
		if strings.HasPrefix(c.Labels[sandbox.LabelLease], dir) {
			out = append(out, c.Name)
		}
	}
	return out
}
