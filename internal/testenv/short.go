package testenv

import (
	"os"
	"strings"
	"testing"
)

// SkipShort skips a test that needs real parts (the Docker daemon, Podman,
// the Kubernetes binaries) under `go test -short`, the inner loop of unit
// tests and fakes. A PYBOX_REQUIRE_* variable says those tests must run, so
// -short with one set fails the test instead: the two never combine into a
// silent skip.
func SkipShort(t testing.TB, what string) {
	t.Helper()
	if !testing.Short() {
		return
	}
	if req := requireVars(); len(req) > 0 {
		t.Fatalf("-short skips the tests that need %s, but %s says they must run: unset it or drop -short", what, strings.Join(req, ", "))
	}
	t.Skipf("-short: needs %s", what)
}

// requireVars lists the PYBOX_REQUIRE_* variables set in the environment.
func requireVars() []string {
	var set []string
	for _, kv := range os.Environ() {
		name, value, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "PYBOX_REQUIRE_") && value != "" {
			set = append(set, name)
		}
	}
	return set
}
