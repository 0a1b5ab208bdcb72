package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestBusy: past the concurrency limit and the queue wait, a call gets a
// clear "busy" tool error; the running call is unaffected.
func TestBusy(t *testing.T) {
	s := startServer(t, "PYBOX_MAX_CONCURRENT=1", "PYBOX_QUEUE_WAIT=1s")
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := s.cs.CallTool(t.Context(), callParams("execute_code", map[string]any{"code": "import time\ntime.sleep(4)\nprint('slow done')"}))
		if err != nil {
			res = &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: err.Error()}}}
		}
		done <- res
	}()
	deadline := time.Now().Add(20 * time.Second)
	for len(s.containers()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the first call's container never appeared")
		}
		time.Sleep(50 * time.Millisecond)
	}
	res := s.call("execute_code", map[string]any{"code": "print('second')"})
	if !res.IsError || !strings.Contains(text(res), "busy") {
		t.Errorf("second call: isError=%v %q; want a busy tool error", res.IsError, text(res))
	}
	if first := <-done; !strings.Contains(text(first), "slow done") {
		t.Errorf("first call: %s", text(first))
	}
}

// TestDockerUnreachable: with no daemon the server still starts and
// answers every run with a clear tool error; `pybox run` exits 125 and
// doctor names the fix.
func TestDockerUnreachable(t *testing.T) {
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
	doc := exec.Command(pyboxBin, "doctor")
	doc.Env = append(os.Environ(), noDaemon)
	out, _ = doc.CombinedOutput()
	if code := doc.ProcessState.ExitCode(); code != 1 || !strings.Contains(string(out), "FAIL docker") || !strings.Contains(string(out), "start dockerd") {
		t.Errorf("doctor without Docker: exit %d\n%s", code, out)
	}
}
