//go:build !windows

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pybox-dev/pybox/internal/testenv"
)

// TestPolicyEveryEntryPoint: the strict policy refuses `import subprocess`
// (a guardrail, checked in the sandbox) and a deny rule's pattern (checked
// on the host) in `pybox run` and `pybox eval` as it does in execute_code:
// nothing runs, and an eval sample does not pass.
func TestPolicyEveryEntryPoint(t *testing.T) {
	parallelTest(t)
	testenv.RuntimeImage(t, testenv.Docker(t), "base") // its allowed program runs (and -short skips it)
	guarded := "import subprocess\nprint('RAN')\n"
	denied := "p = '/proc/1/'\nprint('RAN')\n"
	for _, code := range []string{guarded, denied} {
		out, errOut, status := runBinary(t, code, "run", "--policy", "strict", "-")
		if status != exitPolicy || strings.Contains(out, "RAN") || !strings.Contains(errOut, "POLICY_VIOLATION") {
			t.Errorf("pybox run --policy strict %q: status %d, stdout %q, stderr %q; want %d, POLICY_VIOLATION, nothing run",
				code, status, out, errOut, exitPolicy)
		}
	}
	if out, _, status := runBinary(t, denied, "run", "--policy", "strict", "--json", "-"); status != exitPolicy ||
		!strings.Contains(out, `"policy_violation"`) || !strings.Contains(out, "/proc") {
		t.Errorf("pybox run --json of a denied program: status %d, %s; want %d and a policy_violation naming the rule", status, out, exitPolicy)
	}
	if out, errOut, status := runBinary(t, "print('RAN')\n", "run", "--policy", "strict", "-"); status != 0 || out != "RAN\n" {
		t.Errorf("pybox run --policy strict of an allowed program: status %d, %q %q", status, out, errOut)
	}
	in := filepath.Join(t.TempDir(), "samples.jsonl")
	os.WriteFile(in, []byte(`{"id": 1, "code": "import subprocess\nprint('RAN')"}`+"\n"+
		`{"id": 2, "code": "p = '/proc/1/'\nprint('RAN')"}`+"\n"+`{"id": 3, "code": "print('RAN')"}`+"\n"), 0o644)
	res := filepath.Join(t.TempDir(), "results.jsonl")
	if _, errOut, status := runEval(t, "--policy", "strict", "-o", res, in); status != 0 {
		t.Fatalf("pybox eval: status %d\n%s", status, errOut)
	}
	got := readEvalResults(t, res)
	if len(got) != 3 {
		t.Fatalf("%d results; want 3", len(got))
	}
	for _, r := range got[:2] {
		if r.Passed || r.Error != evalPolicy || strings.Contains(r.Stdout, "RAN") {
			t.Errorf("eval --policy strict, sample %s: passed=%v error=%q stdout=%q; want error policy and nothing run", r.ID, r.Passed, r.Error, r.Stdout)
		}
	}
	if !got[2].Passed {
		t.Errorf("eval --policy strict of an allowed sample did not pass: %+v", got[2])
	}
}
