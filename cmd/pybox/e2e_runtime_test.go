//go:build !windows

package main

import (
	"strings"
	"testing"
)

// Results are the same under runc and gVisor: large outputs arrive whole
// (gVisor writes a container's stdout in short writes), /tmp keeps its
// size limit, sessions keep their variables, and a fork bomb ends with a
// clear result (runc: fork fails; gVisor: the sandbox is killed for its
// processes or its memory, reported as such, never as an unexplained exit
// status 2).
func TestRuntimeParity(t *testing.T) {
	parallelTest(t)
	eachRuntime(t, func(t *testing.T) {
		s := startServer(t, "PYBOX_OUTPUT_LIMIT=8m")
		big := "import sys, os\nsys.stdout.write('o' * 3_000_000)\nsys.stdout.flush()\nos.write(2, b'e' * 2_000_000)\nprint('\\nend')"
		out, res := s.exec(map[string]any{"code": big})
		if out.ExitCode != 0 || out.Truncated || strings.Count(out.Stdout, "o") != 3_000_000 || strings.Count(out.Stderr, "e") != 2_000_000 || !strings.HasSuffix(out.Stdout, "end\n") {
			t.Errorf("large output: exit %d truncated=%v, %d bytes out, %d err: %.200s", out.ExitCode, out.Truncated, len(out.Stdout), len(out.Stderr), text(res))
		}
		tmp := "try:\n    open('/tmp/big', 'wb').write(b'x' * (100 << 20))\n    print('wrote 100 MiB')\nexcept OSError as e:\n    print('refused', e.errno)"
		if out, res := s.exec(map[string]any{"code": tmp}); !strings.Contains(out.Stdout, "refused 28") {
			t.Errorf("/tmp past its 64 MiB size: %s", text(res))
		}
		s.exec(map[string]any{"code": "x = 41", "session_id": "p"})
		if out, res := s.exec(map[string]any{"code": "print(x + 1)", "session_id": "p"}); out.Stdout != "42\n" {
			t.Errorf("session: %s", text(res))
		}
		bomb := "import os, time\nprint('before', flush=True)\nn = 0\ntry:\n    for _ in range(2000):\n        if os.fork() == 0:\n            time.sleep(60); os._exit(0)\n        n += 1\nexcept OSError as e:\n    print('fork refused after', n)\n"
		out, res = s.exec(map[string]any{"code": bomb, "timeout_s": 60})
		switch {
		case out.TimedOut:
			t.Errorf("the fork bomb ran into its timeout: %s", text(res))
		case out.OOMKilled: // gVisor: 140 Python processes may pass the memory limit first
			if !strings.Contains(text(res), "ran out of memory") {
				t.Errorf("an out-of-memory kill is not explained: %s", text(res))
			}
		case out.ResourceKilled:
			if !res.IsError || !strings.Contains(text(res), "resource limits") || !strings.Contains(out.Stdout, "before") {
				t.Errorf("a sandbox killed for its resources is not explained: %s", text(res))
			}
		case !strings.Contains(out.Stdout, "fork refused after"):
			t.Errorf("fork bomb: %s", text(res))
		}
		t.Logf("fork bomb under %s: exit %d, oom=%v resource_killed=%v, %q", serverRuntimeName(t), out.ExitCode, out.OOMKilled, out.ResourceKilled, strings.TrimSpace(out.Stdout))
		if out, res := s.exec(map[string]any{"code": "print('after')"}); out.Stdout != "after\n" {
			t.Errorf("after the battery: %s", text(res))
		}
		// With memory to spare, the process limit is what stops it.
		few := startServer(t, "PYBOX_PIDS=32", "PYBOX_MEMORY=2g")
		out, res = few.exec(map[string]any{"code": bomb, "timeout_s": 60})
		t.Logf("fork bomb with 32 processes under %s: exit %d, resource_killed=%v, %q", serverRuntimeName(t), out.ExitCode, out.ResourceKilled, strings.TrimSpace(out.Stdout))
		if serverRuntime(t) == "runsc" {
			if !out.ResourceKilled || !res.IsError || !strings.Contains(text(res), "resource limits") || !strings.Contains(out.Stdout, "before") {
				t.Errorf("gVisor's abort past the process limit is not reported as such: %s", text(res))
			}
		} else if !strings.Contains(out.Stdout, "fork refused after") {
			t.Errorf("fork bomb under 32 processes: %s", text(res))
		}
	})
}

func serverRuntimeName(t testing.TB) string {
	if rt := serverRuntime(t); rt != "" {
		return rt
	}
	return "runc"
}
