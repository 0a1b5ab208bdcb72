package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pybox-dev/pybox/internal/engine"
	"github.com/pybox-dev/pybox/internal/testenv"
	"github.com/pybox-dev/pybox/tools"
)

// pyboxBin is the binary under test, built once by TestMain.
var pyboxBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "pybox-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	pyboxBin = filepath.Join(dir, "pybox")
	if out, err := exec.Command("go", "build", "-o", pyboxBin, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building pybox: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	if code == 0 {
		code = checkNoLeftovers()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// server is a running `pybox serve` with a connected MCP client.
type server struct {
	t       *testing.T
	cs      *mcp.ClientSession
	cmd     *exec.Cmd
	storage string
	eng     *engine.Client
	stderr  *syncBuffer
}

// startServer starts the real binary over stdio with extra environment
// variables and connects the MCP Go SDK client to it. At cleanup it closes
// the session and checks that no container of this server is left.
func startServer(t *testing.T, env ...string) *server {
	t.Helper()
	return startServerWith(t, nil, env...)
}

// startServerWith is startServer with client options (notification handlers).
func startServerWith(t *testing.T, opts *mcp.ClientOptions, env ...string) *server {
	t.Helper()
	eng := testenv.Docker(t)
	testenv.RuntimeImage(t, eng, "base")
	s := &server{t: t, storage: t.TempDir(), eng: eng, stderr: &syncBuffer{}}
	s.cmd = exec.Command(pyboxBin, "serve")
	// Later entries win, so a caller can pass its own storage or state dir.
	defaults := []string{"CODE_STORAGE_DIR=" + s.storage, "PYBOX_STATE_DIR=" + t.TempDir(), "PYBOX_BUILD=never"}
	s.cmd.Env = append(append(os.Environ(), defaults...), env...)
	s.cmd.Stderr = s.stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "pybox-e2e", Version: "test"}, opts)
	cs, err := client.Connect(t.Context(), &mcp.CommandTransport{Command: s.cmd}, nil)
	if err != nil {
		t.Fatalf("connect to pybox serve: %v\nstderr:\n%s", err, s.stderr)
	}
	s.cs = cs
	t.Cleanup(s.close)
	return s
}

func (s *server) close() {
	if err := s.cs.Close(); err != nil {
		s.t.Errorf("closing the session: %v", err)
	}
	if left := s.containers(); len(left) > 0 {
		s.t.Errorf("containers left behind by the server: %v", left)
	}
	if s.t.Failed() {
		s.t.Logf("server stderr:\n%s", s.stderr)
	}
}

// containers lists the pybox containers this server process owns now.
func (s *server) containers() []engine.Summary {
	return testenv.Managed(s.t, s.eng, map[string]string{"pybox.pid": strconv.Itoa(s.cmd.Process.Pid)})
}

// call invokes a tool and fails the test on a protocol error.
func (s *server) call(name string, args map[string]any) *mcp.CallToolResult {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(s.t.Context(), 3*time.Minute)
	defer cancel()
	res, err := s.cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		s.t.Fatalf("call %s: %v", name, err)
	}
	return res
}

// exec runs code through execute_code and decodes the structured result.
func (s *server) exec(args map[string]any) (tools.ExecutionOutput, *mcp.CallToolResult) {
	s.t.Helper()
	res := s.call("execute_code", args)
	return decode[tools.ExecutionOutput](s.t, res), res
}

// decode re-marshals a result's structured content into T.
func decode[T any](t *testing.T, res *mcp.CallToolResult) T {
	t.Helper()
	var out T
	if res.StructuredContent == nil {
		t.Fatalf("no structured content; content: %s", text(res))
	}
	b, err := json.Marshal(res.StructuredContent)
	if err == nil {
		err = json.Unmarshal(b, &out)
	}
	if err != nil {
		t.Fatalf("decode structured content: %v", err)
	}
	return out
}

// text joins a result's text content.
func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// syncBuffer is a bytes.Buffer safe for the server's stderr copier.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func callParams(name string, args map[string]any) *mcp.CallToolParams {
	return &mcp.CallToolParams{Name: name, Arguments: args}
}

// checkNoLeftovers fails the suite if any pybox container on this host
// belongs to a process that no longer runs (every server here has exited).
func checkNoLeftovers() int {
	eng, err := engine.New(nil)
	if err != nil {
		return 0
	}
	defer eng.Close()
	list, err := eng.List(context.Background(), map[string]string{"pybox.managed": "true"})
	if err != nil {
		return 0 // no daemon: the Docker tests already skipped or failed
	}
	host, _ := os.Hostname()
	bad := 0
	for _, c := range list {
		pid, _ := strconv.Atoi(c.Labels["pybox.pid"])
		if c.Labels["pybox.host"] == host && pid > 0 && syscall.Kill(pid, 0) != nil {
			fmt.Fprintf(os.Stderr, "leftover container after the suite: %s %v\n", c.Name, c.Labels)
			bad++
		}
	}
	if bad > 0 {
		return 1
	}
	return 0
}
