package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pybox-dev/pybox/internal/testenv"
	"github.com/pybox-dev/pybox/tools"
)

// TestStrictPolicy: the strict policy's limits are in force and its
// guardrails refuse code before any container runs.
func TestStrictPolicy(t *testing.T) {
	s := startServer(t, "PYBOX_POLICY=strict")
	cfg := decode[tools.EnvironmentView](t, s.call("get_environment_config", map[string]any{}))
	if cfg.Limits == nil || cfg.Limits.MemoryBytes != 256<<20 || cfg.Limits.TimeoutS != 10 || cfg.Limits.Pids != 64 {
		t.Errorf("limits under the strict policy: %+v", cfg.Limits)
	}
	var res string
	var isErr bool
	n := s.containersCreated(func() {
		r := s.call("execute_code", map[string]any{"code": "x = 1\nimport ctypes\nprint(ctypes)"})
		res, isErr = text(r), r.IsError
	})
	if !isErr || !strings.Contains(res, "POLICY_VIOLATION") || !strings.Contains(res, "line 2") || n != 0 {
		t.Errorf("isError=%v containers=%d text=%q; want a POLICY_VIOLATION before any container", isErr, n, res)
	}
	probe := "import os\nfor p in ('/sys/fs/cgroup/memory.max', '/sys/fs/cgroup/memory/memory.limit_in_bytes'):\n" +
		"    if os.path.exists(p):\n        print(open(p).read().strip()); break\n" // cgroup v2, then v1
	out, _ := s.exec(map[string]any{"code": probe})
	if out.Stdout != "268435456\n" {
		t.Errorf("memory limit seen inside: %q %q; want 256 MiB", out.Stdout, out.Stderr)
	}
}

// The strict policy runs sandboxes under gVisor when the daemon has it,
// and says so; a policy requiring a runtime the daemon lacks refuses to
// start, naming it; an explicit --runtime against a requirement is refused.
func TestPolicyRuntime(t *testing.T) {
	eng := testenv.Docker(t)
	hasRunsc := len(testenv.Runtimes(t, eng)) > 1
	s := startServer(t, "PYBOX_POLICY=strict")
	out, res := s.exec(map[string]any{"code": "import os\nprint(os.uname().release)"})
	if gvisor := strings.Contains(out.Stdout, "gvisor"); gvisor != hasRunsc {
		t.Errorf("strict policy, daemon has runsc=%v: the sandbox kernel is %q (%s)", hasRunsc, out.Stdout, text(res))
	}
	if hasRunsc && !strings.Contains(s.stderr.String(), "runtime=runsc") {
		t.Errorf("the log does not say the policy chose runsc:\n%s", s.stderr)
	}
	dir := t.TempDir()
	policy := filepath.Join(dir, "needs-kata.json")
	os.WriteFile(policy, []byte(`{"name": "needs-kata", "runtime": {"require": "kata-nonexistent"}}`), 0o644)
	_, stderr, code := runBinary(t, "", "doctor", "--policy", policy)
	if code == 0 || !strings.Contains(stderr, "requires the kata-nonexistent runtime, which the Docker daemon does not have") {
		t.Errorf("a policy requiring a missing runtime: exit %d, %s", code, stderr)
	}
	_, stderr, code = runBinary(t, "", "doctor", "--policy", policy, "--runtime", "runc")
	if code == 0 || !strings.Contains(stderr, "requires the kata-nonexistent runtime, but runc was chosen") {
		t.Errorf("--runtime against a policy's requirement: exit %d, %s", code, stderr)
	}
}
