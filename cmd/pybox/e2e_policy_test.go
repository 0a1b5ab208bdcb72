//go:build !windows

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
	parallelTest(t)
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
	// The original Code Mode server's documented limits, checked in the sandbox.
	for code, rule := range map[string]string{"import subprocess": "import_denied", "import os": "import_not_allowed",
		"eval('1')": "name_denied", strings.Repeat("x = 1\n", 401): "max_lines", "s = '" + strings.Repeat("a", 8000) + "'": "max_chars"} {
		out := decode[tools.ExecutionOutput](t, s.call("execute_code", map[string]any{"code": code}))
		if out.ErrorCode != "POLICY_VIOLATION" || out.Rule != rule {
			t.Errorf("strict, %.30q: %+v; want %s", code, out, rule)
		}
	}
	if out, res := s.exec(map[string]any{"code": "import math, json, re, statistics, collections, itertools, functools, datetime, typing\nprint(math.pi > 3)"}); out.Stdout != "True\n" {
		t.Errorf("strict's allowed imports: %s", text(res))
	}
	// No import: strict allows only a few modules.
	probe := "for p in ('/sys/fs/cgroup/memory.max', '/sys/fs/cgroup/memory/memory.limit_in_bytes'):\n" +
		"    try:\n        print(open(p).read().strip()); break\n    except OSError:\n        pass\n" // cgroup v2, then v1
	out, _ := s.exec(map[string]any{"code": probe})
	if out.Stdout != "268435456\n" {
		t.Errorf("memory limit seen inside: %q %q; want 256 MiB", out.Stdout, out.Stderr)
	}
}

// The strict policy runs sandboxes under gVisor when the daemon has it,
// and says so; a policy requiring a runtime the daemon lacks refuses to
// start, naming it; an explicit --runtime against a requirement is refused.
func TestPolicyRuntime(t *testing.T) {
	parallelTest(t)
	eng := testenv.Docker(t)
	hasRunsc := len(testenv.Runtimes(t, eng)) > 1
	s := startServer(t, "PYBOX_POLICY=strict")
	out, res := s.exec(map[string]any{"code": "print(open('/proc/sys/kernel/osrelease').read().strip())"})
	if gvisor := strings.Contains(out.Stdout, "gvisor"); gvisor != hasRunsc {
		t.Errorf("strict policy, daemon has runsc=%v: the sandbox kernel is %q (%s)", hasRunsc, out.Stdout, text(res))
	}
	if hasRunsc {
		if log, ok := s.stderr.Await("runtime=runsc"); !ok {
			t.Errorf("the log does not say the policy chose runsc:\n%s", log)
		}
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

// TestPolicyGuardrails: a policy's static guardrails, checked on a real
// parse inside the sandbox before the program runs: each rule, and each
// way round it with a constant argument, is a POLICY_VIOLATION tool error
// naming the rule, the name and the line, with structured content, and
// nothing of the program runs (it would have written a file); allowed
// code runs; the same in a session, which survives a refused call.
func TestPolicyGuardrails(t *testing.T) {
	parallelTest(t)
	policy := filepath.Join(t.TempDir(), "guarded.json")
	os.WriteFile(policy, []byte(`{"name": "guarded", "guard": {"max_chars": 300, "max_lines": 12,
		"imports_allow": ["math", "json", "importlib", "builtins", "os"], "imports_deny": ["os.path"],
		"names_deny": ["exec", "eval"], "attributes_deny": ["system", "fork"]}}`), 0o644)
	s := startServer(t, "PYBOX_POLICY="+policy)
	ran := "open('ran.txt', 'w').write('it ran')\n"
	for _, tc := range []struct {
		code, rule, detail string
		line               int
	}{
		{"import subprocess", "import_not_allowed", "subprocess", 2},
		{"from subprocess import run", "import_not_allowed", "subprocess", 2},
		{"import os.path", "import_denied", "os.path", 2},
		{"x = __import__('sub' + 'process')", "import_not_allowed", "subprocess", 2},
		{"import importlib\nm = importlib.import_module(f'socket')", "import_not_allowed", "socket", 3},
		{"eval('1 + 1')", "name_denied", "eval", 2},
		{"import builtins\nbuiltins.exec('x = 1')", "name_denied", "exec", 3},
		{"f = getattr(__builtins__, 'ev' + 'al')", "name_denied", "eval", 2},
		{"f = globals()['__builtins__']['exec']", "name_denied", "exec", 2},
		{"import os\nos.system('id')", "attribute_denied", "system", 3},
		{"import os\nf = getattr(os, 'fork')", "attribute_denied", "fork", 3},
		{"from os import system", "attribute_denied", "system", 2},
		{"x = 1\n" + strings.Repeat("y = 2\n", 12), "max_lines", "", 0},
		{"s = '" + strings.Repeat("a", 300) + "'", "max_chars", "", 0},
	} {
		code := ran + tc.code
		r := s.call("execute_code", map[string]any{"code": code})
		out := decode[tools.ExecutionOutput](t, r)
		txt := text(r)
		if !r.IsError || !strings.HasPrefix(txt, "POLICY_VIOLATION: rule "+tc.rule) || out.ErrorCode != "POLICY_VIOLATION" ||
			out.Rule != tc.rule || out.Line != tc.line || (tc.detail != "" && out.Detail != tc.detail) {
			t.Errorf("%q: isError=%v %q %+v; want rule %s detail %q line %d", tc.code, r.IsError, txt, out, tc.rule, tc.detail, tc.line)
		}
		if _, err := os.Stat(filepath.Join(s.storage, "ran.txt")); err == nil {
			t.Fatalf("%q: the program ran although the guardrails refused it", tc.code)
		}
	}
	// Allowed code runs, including names that only look alike.
	if out, res := s.exec(map[string]any{"code": "import math, json\nevaluate = 2\nprint(json.dumps(math.floor(2.5)), evaluate, 'eval')"}); out.Stdout != "2 2 eval\n" {
		t.Errorf("allowed code: %s", text(res))
	}
	// A session: a refused call leaves it alive with its variables.
	if out := s.sessionRun("g", "kept = 41"); out.ExitCode != 0 {
		t.Fatalf("session: %+v", out)
	}
	r := s.call("execute_code", map[string]any{"code": "import subprocess", "session_id": "g"})
	if !r.IsError || !strings.Contains(text(r), "POLICY_VIOLATION") {
		t.Errorf("a refused session call: %s", text(r))
	}
	if out := s.sessionRun("g", "print(kept + 1)"); out.Stdout != "42\n" {
		t.Errorf("the session after a refused call: %+v", out)
	}
	// A file run is checked too.
	if res := s.call("write_file", map[string]any{"path": "bad.py", "content": ran + "import socket\n"}); res.IsError {
		t.Fatal(text(res))
	}
	if r := s.call("execute_code_file", map[string]any{"file_path": "bad.py"}); !r.IsError || !strings.Contains(text(r), "rule import_not_allowed: socket (line 2)") {
		t.Errorf("a refused file: %s", text(r))
	}
	if _, err := os.Stat(filepath.Join(s.storage, "ran.txt")); err == nil {
		t.Errorf("the refused file ran")
	}
}
