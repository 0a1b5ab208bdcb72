//go:build !windows

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pybox-dev/pybox/internal/testenv"
)

// TestPodmanRootful: pybox on rootful Podman's Docker-compatible socket
// (Debian's Podman 4.3, which refuses to start a container whose default
// process and open-file limits it cannot grant, and knows neither uid= nor
// nr_inodes= on a tmpfs): a run, a run reading a file the file tools
// wrote, a timeout, an OOM kill reported as one, a session keeping its
// variables, and a pybox eval batch all work, and nothing is left on Podman.
func TestPodmanRootful(t *testing.T) {
	pod, host := testenv.Podman(t)
	s := startServer(t, "DOCKER_HOST="+host)
	s.eng = pod // containers are looked for (and checked at cleanup) on Podman
	if out, res := s.exec(map[string]any{"code": "import os\nprint(os.getuid() != 0, 1 + 1)"}); out.Stdout != "True 2\n" || out.ExitCode != 0 {
		t.Fatalf("a run on Podman: %s", text(res))
	}
	if res := s.call("write_file", map[string]any{"path": "data.csv", "content": "a,b\n1,2\n"}); res.IsError {
		t.Fatalf("write_file: %s", text(res))
	}
	out, res := s.exec(map[string]any{"code": "print(open('data.csv').read().split()[1])\nopen('made.txt', 'w').write('by the sandbox')"})
	if out.Stdout != "1,2\n" {
		t.Fatalf("a run reading the workspace on Podman: %s", text(res))
	}
	if b, err := os.ReadFile(filepath.Join(s.storage, "made.txt")); err != nil || string(b) != "by the sandbox" {
		t.Errorf("the file the sandbox wrote: %q, %v", b, err)
	}
	if out, res := s.exec(map[string]any{"code": "while True: pass", "timeout_s": 1}); !out.TimedOut {
		t.Errorf("a timeout on Podman: %s", text(res))
	}
	// Podman 4.3 does not report an OOM kill; the runner's own word (its
	// cgroup's count of OOM kills) does.
	if out, res := s.exec(map[string]any{"code": "x = bytearray(900 << 20); x[::4096] = b'x' * len(x[::4096])"}); !out.OOMKilled || out.ExitCode != 137 {
		t.Errorf("an OOM kill on Podman: %s", text(res))
	}
	s.sessionRun("pod", "x = 41")
	if got := s.sessionRun("pod", "print(x + 1)"); got.Stdout != "42\n" {
		t.Errorf("a session on Podman: %+v", got)
	}
	in := filepath.Join(t.TempDir(), "samples.jsonl")
	os.WriteFile(in, []byte(strings.Join([]string{
		`{"id": "pass", "code": "def f(): return 1", "test": "assert f() == 1"}`,
		`{"id": "fail", "code": "def f(): return 2", "test": "assert f() == 1"}`,
		`{"id": "files", "code": "open('/workspace/x', 'w').write('x')\nprint(sorted(__import__('os').listdir('/workspace')))"}`,
	}, "\n")), 0o644)
	stdout, stderr, code := runEvalEnv(t, []string{"DOCKER_HOST=" + host}, in)
	if code != 0 {
		t.Fatalf("pybox eval on Podman: exit %d\n%s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], `"passed":true`) || !strings.Contains(lines[1], `"passed":false`) ||
		!strings.Contains(lines[2], `"stdout":"['main.py', 'x']\n"`) {
		t.Errorf("pybox eval on Podman:\n%s\n%s", stdout, stderr)
	}
	// Runs' containers go in the background: give Podman a moment.
	var left []string
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		left = nil
		for _, c := range testenv.Managed(t, pod, nil) {
			if c.Labels["pybox.role"] != "pool" && c.Labels["pybox.role"] != "session" {
				left = append(left, c.Name+" "+c.Labels["pybox.role"])
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(left) > 0 {
		t.Errorf("left on Podman: %v", left)
	}
}
