//go:build !windows

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pybox-dev/pybox/images"
	"github.com/pybox-dev/pybox/internal/testenv"
)

// escapeProbe tries the usual ways out of a container and prints, for
// each, "name: ok" or "name: <error>".
const escapeProbe = `import ctypes, os, socket
def attempt(name, f):
    try:
        f(); print(name + ": ok")
    except Exception as e:
        print(name + ": " + type(e).__name__)
libc = ctypes.CDLL(None, use_errno=True)
def mount():
    if libc.mount(b"none", b"/tmp", b"tmpfs", 0, None) != 0: raise OSError(ctypes.get_errno(), "mount")
attempt("mount", mount)
attempt("chroot", lambda: os.chroot("/tmp"))
attempt("setuid0", lambda: os.setuid(0))
attempt("kcore", lambda: open("/proc/kcore", "rb").read(1))
attempt("docker_sock", lambda: socket.socket(socket.AF_UNIX).connect("/var/run/docker.sock"))
attempt("raw_socket", lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP))
attempt("mknod", lambda: os.mknod("/tmp/sda", 0o600 | 0o60000, os.makedev(8, 0)))
attempt("write_sys", lambda: open("/proc/sys/kernel/hostname", "w").write("x"))
def fill():
    with open("/tmp/fill", "wb") as f:
        for _ in range(200): f.write(b"x" * (1 << 20))
attempt("fill_tmp", fill)
`

// TestHostileBattery: escapes fail, resource abuse is contained, and after
// it all the server still serves, no container is left and the runtime
// image is unchanged.
func TestHostileBattery(t *testing.T) {
	parallelTest(t)
	eachRuntime(t, hostileBattery)
}

// hostileBattery is TestHostileBattery under one runtime.
func hostileBattery(t *testing.T) {
	eng := testenv.Docker(t)
	testenv.RuntimeImage(t, eng, "base")
	before, _, err := eng.InspectImage(context.Background(), images.Tag("base"))
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t)
	out, res := s.exec(map[string]any{"code": escapeProbe, "timeout_s": 30})
	if res.IsError {
		t.Fatalf("probe: %s", text(res))
	}
	for _, line := range strings.Split(strings.TrimSpace(out.Stdout), "\n") {
		if strings.HasSuffix(line, ": ok") {
			t.Errorf("escape attempt succeeded: %s", line)
		}
	}
	if !strings.Contains(out.Stdout, "fill_tmp: OSError") {
		t.Errorf("filling /tmp was not stopped by its size limit:\n%s", out.Stdout)
	}
	after, _, err := eng.InspectImage(context.Background(), images.Tag("base"))
	if err != nil || after.ID != before.ID {
		t.Errorf("runtime image changed: %s -> %s (%v)", before.ID, after.ID, err)
	}
	if next, _ := s.exec(map[string]any{"code": "print('still serving')"}); next.Stdout != "still serving\n" {
		t.Errorf("after the battery: %q", next.Stdout)
	}
}

// TestContainerKilledFromOutside: a run whose container dies under it
// (here: killed through the daemon) is a result, not a hang or a crash.
func TestContainerKilledFromOutside(t *testing.T) {
	parallelTest(t)
	s := startServer(t)
	done := make(chan string, 1)
	go func() {
		code := "import time\nprint('up', flush=True)\nopen('started', 'w').close()\ntime.sleep(60)"
		res, err := s.cs.CallTool(t.Context(), callParams("execute_code", map[string]any{"code": code, "timeout_s": 90}))
		if err != nil {
			done <- err.Error()
			return
		}
		done <- text(res)
	}()
	deadline := time.Now().Add(30 * time.Second)
	for _, err := os.Stat(filepath.Join(s.storage, "started")); err != nil; _, err = os.Stat(filepath.Join(s.storage, "started")) {
		if time.Now().After(deadline) {
			t.Fatal("the program never started")
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, c := range s.containers() {
		if err := s.eng.Kill(context.Background(), c.ID); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case got := <-done:
		if !strings.Contains(got, "Exit status: 137") || !strings.Contains(got, "up") {
			t.Errorf("result after an outside kill: %q; want exit 137 with the output so far", got)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the call hung after its container was killed")
	}
}

// rawInit is an initialize request with id 7, as a raw client sends it.
const rawInit = `{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}` + "\n"

// rawServer starts pybox serve for a test that speaks JSON-RPC itself;
// it ends (stdin closed, process awaited) with the test.
func rawServer(t *testing.T) (*exec.Cmd, io.WriteCloser, io.Reader) {
	t.Helper()
	cmd := exec.Command(pyboxBin, "serve")
	cmd.Env = append(cmd.Environ(), "CODE_STORAGE_DIR="+t.TempDir(), "PYBOX_STATE_DIR="+t.TempDir(), "PYBOX_BUILD=never")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); cmd.Wait() })
	return cmd, stdin, stdout
}

// TestProtocolGarbage: lines that are not JSON-RPC do not stop the server;
// a proper request afterwards is answered.
func TestProtocolGarbage(t *testing.T) {
	parallelTest(t)
	cmd, stdin, stdout := rawServer(t)
	garbage := "not json at all\n{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\n" + strings.Repeat("x", 1<<20) + "\n[]\n{}\n"
	go func() { io.WriteString(stdin, garbage+rawInit) }()
	lines := bufio.NewScanner(stdout)
	lines.Buffer(make([]byte, 1<<20), 4<<20)
	deadline := time.AfterFunc(20*time.Second, func() { cmd.Process.Kill() })
	defer deadline.Stop()
	errs := 0
	for lines.Scan() {
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  *struct {
				Code int `json:"code"`
			} `json:"error"`
		}
		if json.Unmarshal(lines.Bytes(), &msg) != nil {
			t.Fatalf("the server wrote a line that is not JSON: %.200q", lines.Bytes())
		}
		if msg.Error != nil && string(msg.ID) == "null" && (msg.Error.Code == -32700 || msg.Error.Code == -32600) {
			errs++
		}
		if string(msg.ID) == "7" {
			if len(msg.Result) == 0 || errs != 5 {
				t.Errorf("initialize after garbage: %s; JSON-RPC errors for the 5 bad lines: %d", lines.Bytes(), errs)
			}
			return
		}
	}
	t.Fatalf("the server stopped answering after garbage input (process: %v)", cmd.ProcessState)
}

// TestBatchLineGetsAnError: a JSON-RPC batch (which MCP no longer has) gets
// an error for each request in it, and the server goes on serving.
func TestBatchLineGetsAnError(t *testing.T) {
	parallelTest(t)
	cmd, stdin, stdout := rawServer(t)
	batch := `[{"jsonrpc":"2.0","id":8,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":"nine","method":"ping"}]` + "\n"
	go func() { io.WriteString(stdin, batch+rawInit) }()
	lines := bufio.NewScanner(stdout)
	deadline := time.AfterFunc(20*time.Second, func() { cmd.Process.Kill() })
	defer deadline.Stop()
	var answered []string
	for lines.Scan() {
		var msgs []struct {
			ID     json.RawMessage `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  *struct {
				Code int `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal(lines.Bytes(), &msgs); err != nil {
			var one struct {
				ID     json.RawMessage `json:"id"`
				Result json.RawMessage `json:"result"`
			}
			if json.Unmarshal(lines.Bytes(), &one) == nil && string(one.ID) == "7" {
				if len(one.Result) == 0 || strings.Join(answered, ",") != `8,"nine"` {
					t.Errorf("initialize after a batch: %s; batch errors for ids %v, want 8 and \"nine\"", lines.Bytes(), answered)
				}
				return
			}
			continue
		}
		for _, m := range msgs {
			if m.Error != nil && m.Error.Code == -32600 {
				answered = append(answered, string(m.ID))
			}
		}
	}
	t.Fatalf("the server stopped after a batch line (answered %v, process: %v)", answered, cmd.ProcessState)
}

// TestUnsafeFileNamesRefused: file tools refuse names with newlines or
// invalid UTF-8, and paths too deep or too long, with a clear error, at
// once, creating nothing; the server goes on.
func TestUnsafeFileNamesRefused(t *testing.T) {
	s := startServer(t, "PYBOX_TOOLSET=all")
	tests := []struct{ path, want string }{
		{"two\nlines.py", "control character"},
		{"bad\xff.py", "not valid UTF-8"},
		{strings.Repeat("d/", 2000) + "x.py", "levels deep"},
		{strings.Repeat("a", 5000) + ".py", "bytes long"},
	}
	for _, tt := range tests {
		start := time.Now()
		res := s.call("write_file", map[string]any{"path": tt.path, "content": "x"})
		if !res.IsError || !strings.Contains(text(res), tt.want) {
			t.Errorf("write_file %.30q: isError=%v %.200q; want an error saying %q", tt.path, res.IsError, text(res), tt.want)
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("write_file %.30q took %v", tt.path, took)
		}
	}
	if entries, err := os.ReadDir(s.storage); err != nil || len(entries) != 0 {
		t.Errorf("code storage after the refusals: %v %v; want empty", entries, err)
	}
	if out, _ := s.exec(map[string]any{"code": "print('still serving')"}); out.Stdout != "still serving\n" {
		t.Errorf("after the refusals: %q", out.Stdout)
	}
}

// TestShutdownCancelsRunsInFlight: stdin closing, or SIGTERM, with a long
// run in flight ends the server within seconds, its container removed.
// (A raw client: the SDK's Close waits for the calls in flight before it
// closes the server's stdin.)
func TestShutdownCancelsRunsInFlight(t *testing.T) {
	eng := testenv.Docker(t)
	testenv.RuntimeImage(t, eng, "base")
	for _, how := range []string{"stdin EOF", "SIGTERM"} {
		t.Run(how, func(t *testing.T) {
			storage := t.TempDir()
			cmd := exec.Command(pyboxBin, "serve")
			cmd.Env = append(cmd.Environ(), "CODE_STORAGE_DIR="+storage, "PYBOX_STATE_DIR="+t.TempDir(), "PYBOX_BUILD=never")
			stdin, _ := cmd.StdinPipe()
			cmd.Stdout = io.Discard
			var stderr testenv.LogBuffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill()
			call := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"execute_code","arguments":` +
				`{"code":"import time\nopen('started', 'w').close()\ntime.sleep(120)","timeout_s":150}}}`
			io.WriteString(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`+"\n"+
				`{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"+call+"\n")
			waitFile(t, filepath.Join(storage, "started"))
			start := time.Now()
			if how == "SIGTERM" {
				cmd.Process.Signal(syscall.SIGTERM)
			} else {
				stdin.Close()
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			select {
			case <-exited:
			case <-time.After(30 * time.Second):
				t.Fatalf("the server still ran 30s after %s; its log:\n%s", how, stderr.String())
			}
			if took := time.Since(start); took > 10*time.Second {
				t.Errorf("the server took %v to exit after %s; want a few seconds", took, how)
			}
			if left := testenv.Managed(t, eng, map[string]string{"pybox.pid": strconv.Itoa(cmd.Process.Pid)}); len(left) != 0 {
				t.Errorf("containers left after %s: %v", how, left)
			}
		})
	}
}
