package main

import (
	"strings"
	"testing"

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
