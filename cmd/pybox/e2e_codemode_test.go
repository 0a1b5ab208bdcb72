//go:build !windows

package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pybox-dev/pybox/internal/testenv"
	"github.com/pybox-dev/pybox/tools"
)

// echoServerBuild is the echo test server's binary, built once per run
// (beside pyboxBin) by the first test that needs it.
var echoServerBuild struct {
	once sync.Once
	bin  string
	out  []byte
	err  error
}

// echoServer returns the echo test server's binary, building it the first
// time (skipped under -short, as the Docker tests that use it are).
func echoServer(t *testing.T) string {
	t.Helper()
	testenv.SkipShort(t, "the Docker daemon") // before the build
	b := &echoServerBuild
	b.once.Do(func() {
		b.bin = filepath.Join(filepath.Dir(pyboxBin), "echoserver")
		b.out, b.err = exec.Command("go", "build", "-o", b.bin, "../../internal/downstream/testdata/echoserver").CombinedOutput()
	})
	if b.err != nil {
		t.Fatalf("build the echo server: %v\n%s", b.err, b.out)
	}
	return b.bin
}

// codeModeServer starts pybox with the echo test server as a downstream
// MCP server (and policy, when given).
func codeModeServer(t *testing.T, env ...string) *server {
	t.Helper()
	bin := echoServer(t)
	cfg := filepath.Join(t.TempDir(), "mcp_servers.json")
	b, _ := json.Marshal(map[string]any{"servers": map[string]any{"echo": map[string]any{"command": bin, "description": "test tools"}}})
	os.WriteFile(cfg, b, 0o644)
	return startServer(t, append([]string{"PYBOX_MCP_SERVERS=" + cfg, "PYBOX_MCP_CALL_TIMEOUT=2s"}, env...)...)
}

// TestCodeMode: sandboxed Python calls a downstream MCP server's tools
// through pybox_tools, over the runner's channel, with the network still
// off; results come back as Python values, failures as MCPToolError with
// the downstream message; calls are counted; a session works the same; a
// crashed server is started again and a hung call ends at its timeout
// while the run goes on; list_mcp_tools gives stubs.
func TestCodeMode(t *testing.T) {
	parallelTest(t)
	s := codeModeServer(t)
	prog := `from pybox_tools import tools, call_mcp_tool, list_mcp_tools, AVAILABLE_MCP_TOOLS, MCPToolError
import socket
print(sorted(list_mcp_tools()) == sorted(AVAILABLE_MCP_TOOLS), "echo.echo" in AVAILABLE_MCP_TOOLS)
r = tools.echo.echo(text="ab", times=3)
print(r["echo"])
print(call_mcp_tool("echo.add", a=2, b=40)["sum"])
try:
    tools.echo.fail()
except MCPToolError as e:
    print("failed:", "on purpose" in str(e))
try:
    socket.create_connection(("1.1.1.1", 53), timeout=1)
    print("network: reached")
except OSError:
    print("network: none")
`
	out, res := s.exec(map[string]any{"code": prog})
	if out.Stdout != "True True\nababab\n42\nfailed: True\nnetwork: none\n" || out.MCPCalls != 3 {
		t.Errorf("code mode: %s (mcp_calls %d)", text(res), out.MCPCalls)
	}
	// A session.
	s.sessionRun("cm", "from pybox_tools import tools\nfirst = tools.echo.echo(text='x')['echo']")
	if got := s.sessionRun("cm", "print(first + tools.echo.echo(text='y')['echo'])"); got.Stdout != "xy\n" {
		t.Errorf("code mode in a session: %+v", got)
	}
	// A crash, then a working call (the server is started again); a hang
	// ends at the 2 s call timeout and the program goes on.
	crash := `from pybox_tools import tools, MCPToolError
try:
    tools.echo.crash()
except MCPToolError as e:
    print("crash:", type(e).__name__)
print(tools.echo.echo(text="back")["echo"])
try:
    tools.echo.hang()
except MCPToolError as e:
    print("hang:", "2s" in str(e))
print("done")
`
	if out, res := s.exec(map[string]any{"code": crash, "timeout_s": 30}); out.Stdout != "crash: MCPToolError\nback\nhang: True\ndone\n" {
		t.Errorf("crash and hang: %s", text(res))
	}
	// A module planted in the shared workspace by an earlier run does not
	// stand in for the channel: the real pybox_tools is already imported.
	if res := s.call("write_file", map[string]any{"path": "pybox_tools.py", "content": "class _T:\n    def __getattr__(self, n):\n        return self\n    def __call__(self, **k):\n        return {'echo': 'planted'}\ntools = _T()\n"}); res.IsError {
		t.Fatal(text(res))
	}
	if out, res := s.exec(map[string]any{"code": "from pybox_tools import tools\nprint(tools.echo.echo(text='real')['echo'])"}); out.Stdout != "real\n" || out.MCPCalls != 1 {
		t.Errorf("a planted pybox_tools.py: %s", text(res))
	}
	stubs := decode[tools.ListMCPToolsOutput](t, s.call("list_mcp_tools", map[string]any{}))
	if !strings.Contains(stubs.Stubs, "def echo(text: str, times: int | None = None) -> Any:") || len(stubs.Tools) != 10 {
		t.Errorf("list_mcp_tools: %+v", stubs)
	}
	if _, ok := s.stderr.Await("code mode: tool call", "crashing on purpose"); !ok {
		t.Errorf("the calls and the server's stderr are not in the log")
	}
}

// TestCodeModePolicy: a policy's mcp_tools allowlist refuses other tools
// (MCPToolError), hides them from list_mcp_tools, and calls per run are
// bounded.
func TestCodeModePolicy(t *testing.T) {
	parallelTest(t)
	policy := filepath.Join(t.TempDir(), "p.json")
	os.WriteFile(policy, []byte(`{"name": "p", "mcp_tools": ["echo.echo"]}`), 0o644)
	s := codeModeServer(t, "PYBOX_POLICY="+policy, "PYBOX_MCP_MAX_CALLS=3")
	prog := `from pybox_tools import tools, AVAILABLE_MCP_TOOLS, MCPToolError
print(AVAILABLE_MCP_TOOLS)
try:
    tools.echo.add(a=1, b=2)
except MCPToolError as e:
    print("refused:", e)
for i in range(3):
    try:
        print(tools.echo.echo(text=str(i))["echo"])
    except MCPToolError as e:
        print("limit:", "PYBOX_MCP_MAX_CALLS" in str(e))
`
	out, res := s.exec(map[string]any{"code": prog})
	want := "['echo.echo']\nrefused: the policy does not allow calling echo.add\n0\n1\nlimit: True\n"
	if out.Stdout != want {
		t.Errorf("policy: %s\nwant stdout %q", text(res), want)
	}
	if stubs := decode[tools.ListMCPToolsOutput](t, s.call("list_mcp_tools", map[string]any{})); len(stubs.Tools) != 1 || stubs.Tools[0] != "echo.echo" {
		t.Errorf("list_mcp_tools under the policy: %+v", stubs.Tools)
	}
}

// TestCodeModeFilesystemServer: with the reference filesystem MCP server
// (npm @modelcontextprotocol/server-filesystem) downstream, one
// execute_code lists a folder, reads a file, transforms it and writes the
// result through the server; the same in a session.
func TestCodeModeFilesystemServer(t *testing.T) {
	parallelTest(t)
	fsServer := ciTool(t, "PYBOX_FS_SERVER", "the npm MCP filesystem server")
	data := t.TempDir()
	os.WriteFile(filepath.Join(data, "notes.txt"), []byte("alpha\nbeta\n"), 0o644)
	os.WriteFile(filepath.Join(data, "other.md"), []byte("# x\n"), 0o644)
	cfg := filepath.Join(t.TempDir(), "mcp_servers.json")
	b, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"filesystem": map[string]any{"command": fsServer, "args": []string{data}}}})
	os.WriteFile(cfg, b, 0o644)
	s := startServer(t, "PYBOX_MCP_SERVERS="+cfg)
	stubs := decode[tools.ListMCPToolsOutput](t, s.call("list_mcp_tools", map[string]any{}))
	for _, want := range []string{"filesystem.list_directory", "filesystem.read_text_file", "filesystem.write_file"} {
		if !strings.Contains(strings.Join(stubs.Tools, " "), want) {
			t.Fatalf("list_mcp_tools lacks %s: %v", want, stubs.Tools)
		}
	}
	prog := `from pybox_tools import tools
listing = tools.filesystem.list_directory(path=DATA)
names = sorted(line.split()[-1] for line in str(listing.get("content", listing) if isinstance(listing, dict) else listing).splitlines() if line.strip())
text = tools.filesystem.read_text_file(path=DATA + "/notes.txt")
text = text.get("content", text) if isinstance(text, dict) else text
tools.filesystem.write_file(path=DATA + "/" + OUT, content=text.upper())
print(names)
`
	for _, tc := range []struct{ session, out string }{{"", "OUT.txt"}, {"fs", "OUT2.txt"}} {
		args := map[string]any{"code": prog, "variables": map[string]any{"DATA": data, "OUT": tc.out}}
		if tc.session != "" {
			args["session_id"] = tc.session
		}
		out, res := s.exec(args)
		if out.ExitCode != 0 || !strings.Contains(out.Stdout, "notes.txt") || out.MCPCalls != 3 {
			t.Errorf("session %q: %s (mcp_calls %d)", tc.session, text(res), out.MCPCalls)
		}
		if b, err := os.ReadFile(filepath.Join(data, tc.out)); err != nil || string(b) != "ALPHA\nBETA\n" {
			t.Errorf("session %q: the file written through the filesystem server: %q %v", tc.session, b, err)
		}
	}
}

// TestCodeModeHTTPServer: a downstream server reached by URL (streamable
// HTTP, with headers): here another pybox over HTTP, whose execute_code
// the sandboxed program calls.
func TestCodeModeHTTPServer(t *testing.T) {
	parallelTest(t)
	remote := startHTTP(t, false)
	cfg := filepath.Join(t.TempDir(), "mcp_servers.json")
	b, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"remote": map[string]any{
		"url": remote.url + "/mcp", "headers": map[string]string{"Authorization": "Bearer " + tokenA}}}})
	os.WriteFile(cfg, b, 0o644)
	s := startServer(t, "PYBOX_MCP_SERVERS="+cfg)
	out, res := s.exec(map[string]any{"code": "from pybox_tools import tools\nr = tools.remote.execute_code(code='print(6 * 7)')\nprint(r['stdout'].strip(), r['exit_code'])"})
	if out.Stdout != "42 0\n" || out.MCPCalls != 1 {
		t.Errorf("a program calling another pybox over HTTP: %s", text(res))
	}
}

// TestCodeModeCallFlood: under the strict policy (no import needed), a
// program that writes tool-call lines straight onto its channel and never
// reads a reply is ended with a note, the server's memory stays bounded
// (the old server grew from 33 MiB to 2.2 GiB), and it still serves.
func TestCodeModeCallFlood(t *testing.T) {
	parallelTest(t)
	s := codeModeServer(t, "PYBOX_POLICY=strict")
	flood := `from pybox_tools import call_mcp_tool
cells = dict(zip(call_mcp_tool.__code__.co_freevars, [c.cell_contents for c in call_mcp_tool.__closure__]))
pipe = open(cells["call_w"], "wb", buffering=0, closefd=False)
lines = b'{"id": 1, "tool": "echo.echo", "args": {"text": "x"}}\n' * 2000
while True:
    pipe.write(lines)
`
	s.exec(map[string]any{"code": "from pybox_tools import tools\ntools.echo.echo(text='warm')"}) // the downstream started
	base := peakRSS(t, s.cmd.Process.Pid)
	start := time.Now()
	out, res := s.exec(map[string]any{"code": flood, "timeout_s": 10})
	rss := peakRSS(t, s.cmd.Process.Pid)
	t.Logf("flood: %v, server peak RSS %d -> %d MiB, stderr %q", time.Since(start).Round(time.Millisecond), base>>10, rss>>10, out.Stderr)
	if out.TimedOut || !strings.Contains(out.Stderr, "flooded its tool-call channel") {
		t.Errorf("the flooding run was not ended with a note: %s", text(res))
	}
	if rss > base+16<<10 { // the old server: +36 MiB in 10 s here (2.2 GiB in 45 s on a faster host)
		t.Errorf("server peak RSS %d -> %d MiB during the flood; want it bounded", base>>10, rss>>10)
	}
	if out, res := s.exec(map[string]any{"code": "from pybox_tools import tools\nprint(tools.echo.echo(text='ok')['echo'])"}); out.Stdout != "ok\n" {
		t.Errorf("after the flood: %s", text(res))
	}
}

// TestCodeModeSecrets: what code (and the model) sees of a downstream
// server names it and its failure, never its URL (a key in its path or
// query) or headers; a command server gets a minimal environment plus its
// own env, not pybox's (keys, PYBOX_* settings, the code storage folder).
func TestCodeModeSecrets(t *testing.T) {
	parallelTest(t)
	bin := echoServer(t)
	cfg := filepath.Join(t.TempDir(), "mcp_servers.json")
	b, _ := json.Marshal(map[string]any{"servers": map[string]any{
		"echo": map[string]any{"command": bin, "env": map[string]string{"OWN_SETTING": "mine"}},
		"web":  map[string]any{"url": "http://127.0.0.1:1/mcp/PATHKEY?api_key=SECRET", "headers": map[string]string{"Authorization": "Bearer HDRKEY"}}}})
	os.WriteFile(cfg, b, 0o644)
	s := startServer(t, "PYBOX_MCP_SERVERS="+cfg, "SOME_API_KEY=leaked-key")
	prog := `from pybox_tools import tools, MCPToolError
try:
    tools.web.search(q="x")
except MCPToolError as e:
    print("web:", e)
print("env:", tools.echo.env()["env"])
`
	out, res := s.exec(map[string]any{"code": prog})
	stubs := text(s.call("list_mcp_tools", map[string]any{}))
	seen := out.Stdout + out.Stderr + stubs
	for _, secret := range []string{"SECRET", "PATHKEY", "HDRKEY", "api_key", "127.0.0.1", "leaked-key", "CODE_STORAGE_DIR", "PYBOX_MCP_SERVERS", "PYBOX_STATE_DIR", "PYBOX_BUILD"} {
		if strings.Contains(seen, secret) {
			t.Errorf("code or the model sees %q:\n%s\n%s", secret, text(res), stubs)
		}
	}
	// Its one PYBOX_ variable says where this pybox keeps its folders, so
	// that a pybox started this way refuses to share them.
	for _, want := range []string{"web: MCP server web: it could not be reached", "OWN_SETTING=mine", "PATH=", "PYBOX_PARENT_DIRS="} {
		if !strings.Contains(out.Stdout, want) {
			t.Errorf("the program's output lacks %q: %s", want, text(res))
		}
	}
}
