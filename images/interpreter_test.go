package images

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

// TestParseInterpreter: only an answer carrying the SHA-256 of this probe's
// nonce, from CPython 3.8 or later with an absolute executable, passes.
func TestParseInterpreter(t *testing.T) {
	code, nonce := interpreterProbe()
	sum := sha256.Sum256([]byte(nonce))
	proof := hex.EncodeToString(sum[:])
	if strings.Contains(code, proof) {
		t.Fatal("the probe's code contains its own answer")
	}
	if _, other := interpreterProbe(); other == nonce {
		t.Fatal("two probes share a nonce")
	}
	answer := func(proof, impl, version, exe string) string {
		return `{"proof": "` + proof + `", "implementation": "` + impl + `", "version": ` + version + `, "executable": "` + exe + `"}`
	}
	tests := []struct {
		name, out, wantErr string
	}{
		{"real", "warning from sitecustomize\n" + answer(proof, "cpython", "[3, 11, 2]", "/opt/venv/bin/python") + "\n", ""},
		{"nothing", "", "it printed nothing"},
		{"echoed code", code, "it printed"},
		{"another probe's answer", answer("5df6e0e2761359d30a8275058e299fcc0381534545f55cf43e41983f5d4c9456", "cpython", "[3, 11, 2]", "/usr/bin/python3"), "it printed"},
		{"pypy", answer(proof, "pypy", "[3, 10, 13]", "/usr/bin/pypy3"), "pybox needs CPython 3.8 or later"},
		{"old", answer(proof, "cpython", "[3, 7, 17]", "/usr/bin/python3.7"), "pybox needs CPython 3.8 or later"},
		{"no executable", answer(proof, "cpython", "[3, 12, 1]", ""), "does not know its own executable"},
	}
	for _, tt := range tests {
		in, err := parseInterpreter(tt.out, nonce)
		if tt.wantErr == "" {
			if err != nil || in.Executable != "/opt/venv/bin/python" {
				t.Errorf("%s: %+v, %v; want accepted", tt.name, in, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("%s: err %v; want one containing %q", tt.name, err, tt.wantErr)
		}
	}
}
