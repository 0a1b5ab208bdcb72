//go:build !windows

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
)

// TestExecuteCode covers ordinary programs: output, exit codes, exceptions and stdin.
func TestExecuteCode(t *testing.T) {
	parallelTest(t)
	eachRuntime(t, testExecuteCode)
}

func testExecuteCode(t *testing.T) {
	s := startServer(t)
	tests := []struct {
		name       string
		args       map[string]any
		wantExit   int
		wantStdout string
		wantStderr string // substring
	}{
		{"hello", map[string]any{"code": "print('hello world')"}, 0, "hello world\n", ""},
		{"exit code", map[string]any{"code": "import sys\nprint('bye')\nsys.exit(3)"}, 3, "bye\n", ""},
		{"exception", map[string]any{"code": "x = 1\nprint(x / 0)"}, 1, "", "ZeroDivisionError: division by zero"},
		{"stdin", map[string]any{"code": "a = input()\nb = input()\nprint(a + '+' + b)", "input": "left\nright\n"}, 0, "left+right\n", ""},
		{"input without stdin", map[string]any{"code": "input('name? ')", "timeout_s": 20}, 1, "name? ", "EOFError"},
		{"filename", map[string]any{"code": "import os, sys\nprint(os.path.basename(sys.argv[0])[:6])", "filename": "report"}, 0, "report\n", ""},
		{"cwd is the workspace", map[string]any{"code": "import os\nprint(os.getcwd())"}, 0, "/workspace\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, res := s.exec(tt.args)
			if res.IsError {
				t.Fatalf("tool error: %s", text(res))
			}
			if out.ExitCode != tt.wantExit || out.Stdout != tt.wantStdout || !strings.Contains(out.Stderr, tt.wantStderr) {
				t.Errorf("got exit %d stdout %q stderr %q; want exit %d stdout %q stderr containing %q",
					out.ExitCode, out.Stdout, out.Stderr, tt.wantExit, tt.wantStdout, tt.wantStderr)
			}
			if out.TimedOut || out.OOMKilled || out.Truncated {
				t.Errorf("flags: timed_out=%v oom=%v truncated=%v, want all false", out.TimedOut, out.OOMKilled, out.Truncated)
			}
			if _, err := os.Stat(out.FilePath); err != nil {
				t.Errorf("file_path %q: %v", out.FilePath, err)
			}
		})
	}
}

// TestExceptionTraceback shows the user's own file and line, not the runner's.
func TestExceptionTraceback(t *testing.T) {
	parallelTest(t)
	eachRuntime(t, testExceptionTraceback)
}

func testExceptionTraceback(t *testing.T) {
	s := startServer(t)
	out, _ := s.exec(map[string]any{"code": "def f():\n    raise ValueError('boom')\nf()\n", "filename": "tb"})
	if out.ExitCode != 1 || !strings.Contains(out.Stderr, "line 2, in f") || !strings.Contains(out.Stderr, "ValueError: boom") {
		t.Errorf("exit %d stderr %q: want exit 1 and a traceback of the user's code", out.ExitCode, out.Stderr)
	}
	if strings.Contains(out.Stderr, "runner.py") || strings.Contains(out.Stderr, "runpy") {
		t.Errorf("traceback shows pybox internals: %q", out.Stderr)
	}
}

// TestTimeoutKillsContainer: a runaway program is killed at its deadline,
// reported as a tool error, and its container is gone.
func TestTimeoutKillsContainer(t *testing.T) {
	parallelTest(t)
	eachRuntime(t, testTimeoutKillsContainer)
}

func testTimeoutKillsContainer(t *testing.T) {
	s := startServer(t)
	code := "import socket\nprint(socket.gethostname(), flush=True)\nwhile True: pass"
	out, res := s.exec(map[string]any{"code": code, "timeout_s": 1})
	if !res.IsError || !out.TimedOut || !strings.Contains(text(res), "timed out") {
		t.Fatalf("isError=%v timed_out=%v text=%q; want a timeout tool error", res.IsError, out.TimedOut, text(res))
	}
	host := strings.TrimSpace(out.Stdout) // a container's hostname is its ID's first 12 characters
	if len(host) != 12 {
		t.Fatalf("partial stdout %q, want the container's hostname", out.Stdout)
	}
	if c := s.container(host); c != nil {
		t.Errorf("the timed-out program's container is still present: %v", c)
	}
}

// TestOutputFlood: output beyond the cap is cut and flagged, not fatal.
func TestOutputFlood(t *testing.T) {
	parallelTest(t)
	eachRuntime(t, testOutputFlood)
}

func testOutputFlood(t *testing.T) {
	s := startServer(t, "PYBOX_OUTPUT_LIMIT=64k")
	out, res := s.exec(map[string]any{"code": "import sys\nsys.stdout.write('x' * 5_000_000)\nprint('done', file=sys.stderr)"})
	if res.IsError || !out.Truncated || len(out.Stdout) != 64<<10 || out.ExitCode != 0 {
		t.Errorf("isError=%v truncated=%v len(stdout)=%d exit=%d; want truncated at %d bytes, exit 0",
			res.IsError, out.Truncated, len(out.Stdout), out.ExitCode, 64<<10)
	}
	if out.Stderr != "done\n" {
		t.Errorf("stderr %q: the other stream must be intact", out.Stderr)
	}
}

// TestMemoryBomb: exceeding the memory limit is an OOM result, and the server goes on.
func TestMemoryBomb(t *testing.T) {
	parallelTest(t)
	eachRuntime(t, testMemoryBomb)
}

func testMemoryBomb(t *testing.T) {
	s := startServer(t, "PYBOX_MEMORY=128m")
	out, res := s.exec(map[string]any{"code": "x = []\nwhile True:\n    x.append(bytearray(16 << 20))"})
	if res.IsError || !out.OOMKilled || out.ExitCode != 137 {
		t.Errorf("isError=%v oom_killed=%v exit=%d text=%q; want an OOM result with exit 137", res.IsError, out.OOMKilled, out.ExitCode, text(res))
	}
	if next, _ := s.exec(map[string]any{"code": "print('alive')"}); next.Stdout != "alive\n" {
		t.Errorf("call after OOM: stdout %q", next.Stdout)
	}
}

// TestForkBomb: the pids limit contains a fork bomb and the next call works.
func TestForkBomb(t *testing.T) {
	parallelTest(t)
	eachRuntime(t, testForkBomb)
}

func testForkBomb(t *testing.T) {
	s := startServer(t)
	code := "import os\nn = 0\nfor _ in range(100000):\n    try:\n        if os.fork() == 0:\n            import time; time.sleep(60)\n        n += 1\n    except OSError:\n        break\nprint('contained after', n)"
	out, res := s.exec(map[string]any{"code": code, "timeout_s": 20})
	if serverRuntime(t) == "runsc" && (out.OOMKilled || out.ResourceKilled) {
		// gVisor: 128 processes pass the memory limit first, or its pids
		// limit aborts the sandbox; either is a clear, contained result.
		if !res.IsError && !out.OOMKilled {
			t.Errorf("a sandbox killed for its resources is not an error result: %s", text(res))
		}
	} else if res.IsError || !strings.HasPrefix(out.Stdout, "contained after") {
		t.Fatalf("isError=%v stdout=%q stderr=%q; want the fork loop to hit the pids limit", res.IsError, out.Stdout, out.Stderr)
	}
	var n int
	fmt.Sscanf(out.Stdout, "contained after %d", &n)
	if n >= 128 {
		t.Errorf("forked %d children; the pids limit is 128", n)
	}
	if next, _ := s.exec(map[string]any{"code": "print('alive')"}); next.Stdout != "alive\n" {
		t.Errorf("call after the fork bomb: stdout %q", next.Stdout)
	}
}

// isolationProbe reports, from inside the sandbox, what the program can reach.
const isolationProbe = `import json, os, socket
try:
    ifaces = sorted(os.listdir("/sys/class/net"))
except OSError:  # gVisor has no /sys/class/net
    ifaces = sorted(l.split(":")[0].strip() for l in open("/proc/net/dev").readlines()[2:])
r = {"uid": os.getuid(), "gid": os.getgid(), "ifaces": ifaces}
for l in open("/proc/self/status"):
    if l.startswith(("CapEff", "NoNewPrivs")):
        k, v = l.split(":"); r[k] = v.strip()
def attempt(name, f):
    try:
        f(); r[name] = "ok"
    except Exception as e:
        r[name] = type(e).__name__ + ": " + str(e)
attempt("connect", lambda: socket.create_connection(("1.1.1.1", 53), timeout=2))
attempt("connect_local", lambda: socket.create_connection(("172.17.0.1", 2375), timeout=2))
attempt("dns", lambda: socket.getaddrinfo("example.com", 80))
attempt("write_usr", lambda: open("/usr/pybox-probe", "w"))
attempt("write_etc", lambda: open("/etc/passwd", "a"))
attempt("write_tmp", lambda: open("/tmp/probe", "w").write("x"))
attempt("write_workspace", lambda: open("/workspace/probe.txt", "w").write("x"))
r["env"] = dict(os.environ)
print(json.dumps(r))
`

type isolation struct {
	UID, GID       int
	Ifaces         []string
	CapEff         string
	NoNewPrivs     string
	Connect        string `json:"connect"`
	ConnectLocal   string `json:"connect_local"`
	DNS            string `json:"dns"`
	WriteUsr       string `json:"write_usr"`
	WriteEtc       string `json:"write_etc"`
	WriteTmp       string `json:"write_tmp"`
	WriteWorkspace string `json:"write_workspace"`
	Env            map[string]string
}

// TestIsolation: no network, not root, read-only root, no host environment.
func TestIsolation(t *testing.T) {
	parallelTest(t)
	eachRuntime(t, testIsolation)
}

func testIsolation(t *testing.T) {
	s := startServer(t, "PYBOX_E2E_SECRET=hunter2-do-not-leak")
	out, res := s.exec(map[string]any{"code": isolationProbe})
	if res.IsError || out.ExitCode != 0 {
		t.Fatalf("probe failed: %s", text(res))
	}
	var got isolation
	if err := json.Unmarshal([]byte(out.Stdout), &got); err != nil {
		t.Fatalf("probe output %q: %v", out.Stdout, err)
	}
	checks := []struct {
		name string
		ok   bool
		got  any
	}{
		{"only lo", len(got.Ifaces) == 1 && got.Ifaces[0] == "lo", got.Ifaces},
		{"connect fails", got.Connect != "ok", got.Connect},
		{"connect to the host fails", got.ConnectLocal != "ok", got.ConnectLocal},
		{"dns fails", strings.HasPrefix(got.DNS, "gaierror"), got.DNS},
		{"not root", got.UID != 0 && got.GID != 0, got.UID},
		{"no capabilities", got.CapEff == "0000000000000000", got.CapEff},
		{"no new privileges", got.NoNewPrivs == "1", got.NoNewPrivs},
		// gVisor checks permissions before the read-only mount: EACCES there.
		{"/usr read-only", strings.Contains(got.WriteUsr, "Read-only file system") ||
			serverRuntime(t) == "runsc" && strings.Contains(got.WriteUsr, "Permission denied"), got.WriteUsr},
		{"/etc read-only", got.WriteEtc != "ok", got.WriteEtc},
		{"/tmp writable", got.WriteTmp == "ok", got.WriteTmp},
		{"workspace writable", got.WriteWorkspace == "ok", got.WriteWorkspace},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("%s: got %v", c.name, c.got)
		}
	}
	for k, v := range got.Env {
		if strings.Contains(v, "hunter2") || k == "PYBOX_E2E_SECRET" || k == "CODE_STORAGE_DIR" {
			t.Errorf("host environment leaked into the sandbox: %s=%s", k, v)
		}
	}
	if _, err := os.Stat(s.storage + "/probe.txt"); err != nil {
		t.Errorf("the file written in /workspace is not in code storage: %v", err)
	}
}

// TestParallelCalls: six concurrent calls each get their own correct result.
func TestParallelCalls(t *testing.T) {
	parallelTest(t)
	eachRuntime(t, testParallelCalls)
}

func testParallelCalls(t *testing.T) {
	s := startServer(t)
	var wg sync.WaitGroup
	results := make([]string, 6)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := s.cs.CallTool(t.Context(), callParams("execute_code", map[string]any{
				"code": fmt.Sprintf("import time\ntime.sleep(0.5)\nprint(%d * 7)", i)}))
			if err != nil {
				results[i] = err.Error()
				return
			}
			results[i] = text(res)
		}()
	}
	wg.Wait()
	for i, got := range results {
		if want := fmt.Sprintf("--- stdout ---\n%d\n", i*7); !strings.Contains(got, want) {
			t.Errorf("call %d: got %q, want it to contain %q", i, got, want)
		}
	}
}

// TestBadArguments: invalid input is a clear tool error and harms nothing.
func TestBadArguments(t *testing.T) {
	parallelTest(t)
	s := startServer(t, "PYBOX_MAX_CODE_SIZE=1k")
	tests := []struct {
		name string
		args map[string]any
		want string
	}{
		{"missing code", map[string]any{}, "code"},
		{"unknown argument", map[string]any{"code": "print(1)", "bogus": 1}, "bogus"},
		{"code too large", map[string]any{"code": strings.Repeat("#", 2048)}, "limit is 1024 bytes"},
		{"negative timeout", map[string]any{"code": "print(1)", "timeout_s": -1}, "timeout_s"},
		{"traversal filename", map[string]any{"code": "print(1)", "filename": "../../etc/evil"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := s.call("execute_code", tt.args)
			if tt.want == "" { // accepted, but the file must stay inside code storage
				out := decode[struct {
					FilePath string `json:"file_path"`
				}](t, res)
				if !strings.HasPrefix(out.FilePath, s.storage+"/") || strings.Contains(out.FilePath, "..") {
					t.Errorf("file_path %q escapes %q", out.FilePath, s.storage)
				}
				return
			}
			if !res.IsError || !strings.Contains(text(res), tt.want) {
				t.Errorf("isError=%v text=%q; want a tool error mentioning %q", res.IsError, text(res), tt.want)
			}
		})
	}
	if out, _ := s.exec(map[string]any{"code": "print('still serving')"}); out.Stdout != "still serving\n" {
		t.Errorf("after bad calls: stdout %q", out.Stdout)
	}
}

// TestExecuteVariables: execute_code's variables (the MCP Code Mode
// server's argument) are bound as globals before the program runs, JSON
// values as Python values, in fresh runs and in sessions; a name Python
// cannot bind is refused.
func TestExecuteVariables(t *testing.T) {
	parallelTest(t)
	s := startServer(t)
	vars := map[string]any{"n": 3, "items": []any{1, "two", nil}, "cfg": map[string]any{"on": true, "ratio": 0.5}}
	code := "print(n + len(items), items[2] is None, cfg['on'], cfg['ratio'] * 2, __name__)"
	if out, res := s.exec(map[string]any{"code": code, "variables": vars}); out.Stdout != "6 True True 1.0 __main__\n" {
		t.Errorf("a fresh run: %s", text(res))
	}
	if out, res := s.exec(map[string]any{"code": code, "variables": vars, "session_id": "vars"}); out.Stdout != "6 True True 1.0 __main__\n" {
		t.Errorf("a session: %s", text(res))
	}
	if out, res := s.exec(map[string]any{"code": "print(n)", "session_id": "vars"}); out.Stdout != "3\n" {
		t.Errorf("a session keeps them: %s", text(res))
	}
	if r := s.call("execute_code", map[string]any{"code": "print(1)", "variables": map[string]any{"not-a-name": 1}}); !r.IsError || !strings.Contains(text(r), "not a Python variable name") {
		t.Errorf("a bad variable name: %s", text(r))
	}
}
