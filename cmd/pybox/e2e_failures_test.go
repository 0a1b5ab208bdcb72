//go:build !windows

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestBusy: past the concurrency limit and the queue wait, a call gets a
// clear "busy" tool error; the running call is unaffected.
func TestBusy(t *testing.T) {
	parallelTest(t)
	s := startServer(t, "PYBOX_MAX_CONCURRENT=1", "PYBOX_QUEUE_WAIT=1s")
	done := holding(t, s.cs, s.storage) // the first call's program runs: it holds the one slot
	res := s.call("execute_code", map[string]any{"code": "print('second')"})
	release(t, s.storage)
	if !res.IsError || !strings.Contains(text(res), "busy") {
		t.Errorf("second call: isError=%v %q; want a busy tool error", res.IsError, text(res))
	}
	if first := <-done; !strings.Contains(first, "held") {
		t.Errorf("first call: %s", first)
	}
}

// TestDockerUnreachable: with no daemon the server still starts and
// answers every run with a clear tool error; `pybox run` exits 125 and
// doctor names the fix.
func TestDockerUnreachable(t *testing.T) {
	parallelTest(t)
	const noDaemon = "DOCKER_HOST=unix:///nonexistent/docker.sock"
	client := mcp.NewClient(&mcp.Implementation{Name: "pybox-e2e", Version: "test"}, nil)
	cmd := exec.Command(pyboxBin, "serve")
	cmd.Env = append(os.Environ(), noDaemon, "CODE_STORAGE_DIR="+t.TempDir(), "PYBOX_STATE_DIR="+t.TempDir())
	cs, err := client.Connect(t.Context(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("the server did not start without Docker: %v", err)
	}
	defer cs.Close()
	for range 2 { // and again: the failure is not cached into a wedge
		res, err := cs.CallTool(t.Context(), callParams("execute_code", map[string]any{"code": "print(1)"}))
		if err != nil || !res.IsError || !strings.Contains(text(res), "Docker is not reachable") {
			t.Errorf("execute_code without Docker: err=%v result=%q", err, text(res))
		}
	}
	run := exec.Command(pyboxBin, "run", "-")
	run.Env = append(os.Environ(), noDaemon)
	run.Stdin = strings.NewReader("print(1)")
	out, _ := run.CombinedOutput()
	if code := run.ProcessState.ExitCode(); code != 125 || !strings.Contains(string(out), "Docker is not reachable") {
		t.Errorf("pybox run without Docker: exit %d, %q; want 125 and a clear message", code, out)
	}
	build := exec.Command(pyboxBin, "image", "build")
	build.Env = append(os.Environ(), noDaemon)
	out, _ = build.CombinedOutput()
	if code := build.ProcessState.ExitCode(); code == 0 || !strings.Contains(string(out), "start the Docker daemon") || strings.Contains(string(out), "registry") {
		t.Errorf("pybox image build without Docker: exit %d, %q; want the daemon named, not the registry", code, out)
	}
	doc := exec.Command(pyboxBin, "doctor")
	doc.Env = append(os.Environ(), noDaemon)
	out, _ = doc.CombinedOutput()
	if code := doc.ProcessState.ExitCode(); code != 1 || !strings.Contains(string(out), "FAIL docker") || !strings.Contains(string(out), "named by DOCKER_HOST") || !strings.Contains(string(out), "start that engine") {
		t.Errorf("doctor without Docker: exit %d\n%s", code, out)
	}
}

// A user who may not use the Docker socket is told so, and how to fix it,
// not to start a daemon that is running.
func TestDockerPermissionDenied(t *testing.T) {
	parallelTest(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root to run pybox as another user")
	}
	if fi, err := os.Stat("/var/run/docker.sock"); err != nil || fi.Mode().Perm()&0o006 != 0 || os.Getenv("DOCKER_HOST") != "" {
		t.Skip("the Docker socket is not /var/run/docker.sock closed to other users")
	}
	dir, err := os.MkdirTemp("", "pybox-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o777)
	bin := filepath.Join(dir, "pybox")
	data, _ := os.ReadFile(pyboxBin)
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	const want = "permission denied on /var/run/docker.sock: add your user to the docker group (or set DOCKER_HOST)"
	asNobody := func(args ...string) *exec.Cmd {
		cmd := exec.Command(bin, args...)
		cmd.Dir = dir
		cmd.Env = []string{"HOME=" + dir, "PATH=/usr/bin:/bin", "CODE_STORAGE_DIR=" + filepath.Join(dir, "code"), "PYBOX_STATE_DIR=" + filepath.Join(dir, "state"), "PYBOX_BUILD=never"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		return cmd
	}
	out, _ := asNobody("doctor").CombinedOutput()
	if !strings.Contains(string(out), "FAIL docker") || !strings.Contains(string(out), want) || strings.Contains(string(out), "start dockerd") {
		t.Errorf("doctor as a user outside the docker group:\n%s", out)
	}
	run := asNobody("run", "-")
	run.Stdin = strings.NewReader("print(1)")
	out, _ = run.CombinedOutput()
	if code := run.ProcessState.ExitCode(); code != 125 || !strings.Contains(string(out), want) {
		t.Errorf("pybox run as a user outside the docker group: exit %d\n%s", code, out)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "pybox-e2e", Version: "test"}, nil)
	cs, err := client.Connect(t.Context(), &mcp.CommandTransport{Command: asNobody("serve")}, nil)
	if err != nil {
		t.Fatalf("serve as a user outside the docker group did not start: %v", err)
	}
	defer cs.Close()
	res, err := cs.CallTool(t.Context(), callParams("execute_code", map[string]any{"code": "print(1)"}))
	if err != nil || !res.IsError || !strings.Contains(text(res), want) {
		t.Errorf("execute_code as a user outside the docker group: err=%v %s", err, text(res))
	}
}
