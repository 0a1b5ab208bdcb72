package downstream

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pybox-dev/pybox/internal/testenv"
)

func writeJSON(t *testing.T, v string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "mcp_servers.json")
	os.WriteFile(p, []byte(v), 0o644)
	return p
}

// TestLoad: both formats load; every mistake is named by its field.
func TestLoad(t *testing.T) {
	got, err := Load(writeJSON(t, `{"servers": {"fs": {"command": "npx", "args": ["-y", "x"], "env": {"A": "1"}, "description": "files"},
		"web": {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer t"}}}}`))
	if err != nil || len(got) != 2 || got[0].Name != "fs" || got[0].Args[1] != "x" || got[1].URL != "https://example.com/mcp" {
		t.Fatalf("servers format: %v %+v", err, got)
	}
	got, err = Load(writeJSON(t, `{"mcpServers": {"filesystem": {"command": "node", "args": ["server.js"], "type": "stdio"}}}`))
	if err != nil || len(got) != 1 || got[0].Command != "node" {
		t.Fatalf("Claude Desktop format: %v %+v", err, got)
	}
	_, err = Load(writeJSON(t, `{"servers": {"a-b": {"command": "x"}, "none": {}, "both": {"command": "x", "url": "http://h/"},
		"badurl": {"url": "ftp://h"}, "typo": {"comand": "x"}, "hdr": {"command": "x", "headers": {"a": "b"}}}}`))
	for _, want := range []string{"servers.a-b: the name must be a Python identifier", "servers.none: give command", "servers.both: give command or url, not both",
		`servers.badurl.url: "ftp://h"`, `servers.typo: json: unknown field "comand"`, "servers.hdr.headers"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not say %q", err, want)
		}
	}
	if _, err := Load(writeJSON(t, `{"servers": {}, "mcpServers": {}}`)); err == nil {
		t.Errorf("both formats at once: no error")
	}
}

// TestStubs: typed signatures (required first, optional = None),
// docstrings, calls by qualified name; the Python compiles.
func TestStubs(t *testing.T) {
	tools := []Tool{
		{Server: "filesystem", Name: "read_file", Description: `Read a file. Says """quoted""".`, InputSchema: map[string]any{
			"type": "object", "required": []any{"path"},
			"properties": map[string]any{"path": map[string]any{"type": "string", "description": "the file"}, "head": map[string]any{"type": "integer"}},
		}},
		{Server: "filesystem", Name: "list-allowed", InputSchema: map[string]any{"type": "object"}},
		{Server: "calc", Name: "sum", InputSchema: map[string]any{"type": "object", "required": []any{"values", "class"},
			"properties": map[string]any{"values": map[string]any{"type": "array", "items": map[string]any{"type": "number"}}, "class": map[string]any{"type": []any{"null", "string"}}}}},
	}
	src := Stubs(tools)
	for _, want := range []string{"class filesystem:", "def read_file(path: str, head: int | None = None) -> Any:",
		`return call_mcp_tool("filesystem.read_file", **{k: v for k, v in args.items() if v is not None})`, "def list_allowed() -> Any:",
		`return call_mcp_tool("filesystem.list-allowed")`, "def sum(class_: str, values: list[float]) -> Any:", `args = {"class": class_, "values": values}`} {
		if !strings.Contains(src, want) {
			t.Errorf("stubs lack %q:\n%s", want, src)
		}
	}
	if py, err := exec.LookPath("python3"); err == nil {
		cmd := exec.Command(py, "-c", "import sys; compile(sys.stdin.read(), 'stubs', 'exec')")
		cmd.Stdin = strings.NewReader(src)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("the stubs do not compile: %v\n%s\n%s", err, out, src)
		}
	}
}

// TestMain removes the echo server's build, if a test made it.
func TestMain(m *testing.M) {
	code := m.Run()
	if echoDir != "" {
		os.RemoveAll(echoDir)
	}
	os.Exit(code)
}

// echoDir holds the echo server's build (set by echoServer).
var echoDir string

// echoServer builds the test server once.
var echoServer = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "pybox-echoserver-")
	if err != nil {
		return "", err
	}
	echoDir = dir
	bin := filepath.Join(dir, "echoserver")
	out, err := exec.Command("go", "build", "-o", bin, "./testdata/echoserver").CombinedOutput()
	if err != nil {
		return "", &buildError{err, out}
	}
	return bin, nil
})

type buildError struct {
	err error
	out []byte
}

func (e *buildError) Error() string { return e.err.Error() + ": " + string(e.out) }

// TestManager: against a real MCP server over stdio: tools listed,
// calls answered, a tool's error returned as a result, a crashed server
// started again on the next call, a hung call ended at its timeout, and
// the server's stderr in the log.
func TestManager(t *testing.T) {
	bin, err := echoServer()
	if err != nil {
		t.Fatal(err)
	}
	var logBuf testenv.LogBuffer
	m := newTestManager([]Server{{Name: "echo", Command: bin}}, slog.New(slog.NewTextHandler(&logBuf, nil)))
	defer m.Close()
	ctx := context.Background()
	tools, err := m.Tools(ctx)
	if err != nil || len(tools) != 10 {
		t.Fatalf("tools: %v %+v", err, tools)
	}
	res, err := m.Call(ctx, "echo.echo", map[string]any{"text": "ab", "times": 2}, 10*time.Second)
	if err != nil || res.IsError {
		t.Fatalf("echo: %v %+v", err, res)
	}
	var out struct {
		Echo string `json:"echo"`
		PID  int    `json:"pid"`
	}
	b, _ := json.Marshal(res.StructuredContent)
	json.Unmarshal(b, &out)
	if out.Echo != "abab" {
		t.Errorf("echo: %s", b)
	}
	if res, err := m.Call(ctx, "echo.fail", nil, 10*time.Second); err != nil || !res.IsError {
		t.Errorf("a failing tool: %v %+v", err, res)
	}
	if _, err := m.Call(ctx, "echo.crash", nil, 10*time.Second); err == nil {
		t.Errorf("a crashing server's call did not fail")
	}
	res, err = m.Call(ctx, "echo.echo", map[string]any{"text": "again"}, 10*time.Second)
	b, _ = json.Marshal(res.StructuredContent)
	var again struct {
		PID int `json:"pid"`
	}
	json.Unmarshal(b, &again)
	if err != nil || again.PID == 0 || again.PID == out.PID {
		t.Errorf("after the crash: %v %s; want a new server process (was pid %d)", err, b, out.PID)
	}
	start := time.Now()
	if _, err := m.Call(ctx, "echo.hang", nil, 500*time.Millisecond); err == nil || !strings.Contains(err.Error(), "no answer from hang within") {
		t.Errorf("a hung tool: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("a hung tool took %v to give up on (timeout 500ms)", d)
	}
	if _, err := m.Call(ctx, "nope.echo", nil, time.Second); err == nil || !strings.Contains(err.Error(), "SERVER.TOOL") {
		t.Errorf("an unknown server: %v", err)
	}
	if _, ok := logBuf.Await("crashing on purpose"); !ok { // copied from the server's stderr by a goroutine of its own
		t.Errorf("the server's stderr is not in the log:\n%s", logBuf.String())
	}
}
