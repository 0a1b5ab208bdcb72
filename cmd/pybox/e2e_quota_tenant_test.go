//go:build !windows

package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// One tenant filling the disk with sessions it opens and closes (fresh
// free-form ids each time) keeps within its own quota: the old server
// kept every closed session's folder, each with a quota of its own, so
// one tenant reached 7 times its quota and then the shared disk reserve.
// Tenant b is not affected.
func TestHTTPTenantSessionsStayWithinItsQuota(t *testing.T) {
	parallelTest(t)
	const quotaMiB = 16
	h := startHTTP(t, false, fmt.Sprintf("PYBOX_WORKSPACE_QUOTA=%dm", quotaMiB))
	a, b := h.connect(tokenA), h.connect(tokenB)
	for i := range 6 {
		id := fmt.Sprintf("fill%d", i)
		callOK(t, a, "execute_code", map[string]any{"code": fillSession, "session_id": id})
		callOK(t, a, "close_session", map[string]any{"session_id": id})
	}
	state, storage := filepath.Join(h.state, "tenants", "a"), filepath.Join(h.storage, "tenants", "a")
	total := measured(t, state).Bytes + measured(t, storage).Bytes
	t.Logf("tenant a holds %d MiB after six sessions of 12 MiB, opened and closed; its quota is %d MiB", total>>20, quotaMiB)
	if total > quotaMiB<<20 {
		t.Fatalf("tenant a holds %d MiB on the host; its quota is %d MiB", total>>20, quotaMiB)
	}
	if res, out := callOK(t, b, "execute_code", map[string]any{"code": "print('b ok')"}); res.IsError || !strings.Contains(out, "b ok") {
		t.Fatalf("tenant b: %s", out)
	}
}
