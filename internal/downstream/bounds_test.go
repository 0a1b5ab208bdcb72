package downstream

import (
	"bufio"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pybox-dev/pybox/internal/testenv"
)

// pidOf is the pid an echo server's slow or echo tool reported.
func pidOf(t *testing.T, v any) int {
	t.Helper()
	b, _ := json.Marshal(v)
	var out struct {
		PID int `json:"pid"`
	}
	json.Unmarshal(b, &out)
	return out.PID
}

// allocated runs f and reports how many bytes the process allocated
// meanwhile (everything, not only f's: an upper bound of f's).
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// stdioManager is a Manager of one echo server over stdio, as code mode
// makes it with a 256 KiB result limit.
func stdioManager(t *testing.T, log *slog.Logger) *Manager {
	t.Helper()
	bin, err := echoServer()
	if err != nil {
		t.Fatal(err)
	}
	m := newTestManager([]Server{{Name: "echo", Command: bin}}, log)
	t.Cleanup(m.Close)
	return m
}

// TestManagerOversizedResult: a command server's oversized result (over
// the SDK's 16 MiB line limit, which used to end the connection) is
// refused while it is read, with a clear error, for that call only: a
// call of another run on the same connection gets its answer, and the
// same process serves the next call; the client's memory stays bounded.
func TestManagerOversizedResult(t *testing.T) {
	m := stdioManager(t, nil)
	ctx := t.Context()
	first, err := m.Call(ctx, "echo.slow", map[string]any{"ms": 0, "text": "a"}, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var slowErr error
	var slowPID int
	wg.Go(func() {
		res, err := m.Call(ctx, "echo.slow", map[string]any{"ms": 1500, "text": "b"}, 20*time.Second)
		slowErr = err
		if err == nil {
			slowPID = pidOf(t, res.StructuredContent)
		}
	})
	var bigErr error
	alloc := allocated(func() {
		_, bigErr = m.Call(ctx, "echo.big", map[string]any{"size": 20 << 20}, 20*time.Second)
	})
	wg.Wait()
	t.Logf("big: %v; allocated %d MiB meanwhile", bigErr, alloc>>20)
	if bigErr == nil || !strings.Contains(bigErr.Error(), "over pybox's limit") {
		t.Errorf("a 20 MiB result: %v; want it refused as over the limit", bigErr)
	}
	if alloc > 12<<20 {
		t.Errorf("the client allocated %d MiB for a refused 20 MiB result; want it bounded", alloc>>20)
	}
	if want := pidOf(t, first.StructuredContent); slowErr != nil || slowPID != want {
		t.Errorf("another call on the same connection: %v (pid %d, want %d): one call's oversized result broke it", slowErr, slowPID, want)
	}
}

// TestManagerCallSentOnce: a call whose server dies while serving it (a
// side effect done, its answer lost) is not sent again: the side effect
// happens once; the next call starts the server again.
func TestManagerCallSentOnce(t *testing.T) {
	m := stdioManager(t, nil)
	paid := filepath.Join(t.TempDir(), "paid")
	if _, err := m.Call(t.Context(), "echo.once", map[string]any{"path": paid}, 10*time.Second); err == nil {
		t.Errorf("a call whose server died: no error")
	}
	if b, _ := os.ReadFile(paid); strings.Count(string(b), "paid") != 1 {
		t.Errorf("the call ran %d times; want once", strings.Count(string(b), "paid"))
	}
	if res, err := m.Call(t.Context(), "echo.echo", map[string]any{"text": "x"}, 10*time.Second); err != nil || res.IsError {
		t.Errorf("the next call: %v", err)
	}
}

// TestManagerRestartsSilentServer: a server that stops answering (its
// process stopped, its pipes open) is started again after a call times
// out and a ping goes unanswered, so later calls are answered; the
// stopped one ends by itself once forgotten.
func TestManagerRestartsSilentServer(t *testing.T) {
	var logBuf testenv.LogBuffer
	bin, err := echoServer()
	if err != nil {
		t.Fatal(err)
	}
	m := NewManager([]Server{{Name: "echo", Command: bin}}, Options{Log: slog.New(slog.NewTextHandler(&logBuf, nil)), PingTimeout: time.Second})
	t.Cleanup(m.Close)
	ctx := t.Context()
	res, err := m.Call(ctx, "echo.slow", map[string]any{"ms": 0, "text": "a"}, 10*time.Second)
	if err != nil || res.IsError {
		t.Fatal(err, res)
	}
	frozen := pidOf(t, res.StructuredContent)
	t.Cleanup(func() { killPID(frozen) })
	if r, err := m.Call(ctx, "echo.freeze", nil, 500*time.Millisecond); err == nil {
		t.Fatalf("a frozen server answered: %+v", r)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		res, err := m.Call(ctx, "echo.slow", map[string]any{"ms": 0, "text": "b"}, time.Second)
		if err == nil && pidOf(t, res.StructuredContent) != frozen {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a server that stopped answering was not started again within 20 s: %v", err)
		}
	}
	// Stopped, it was continued when its stop began: it ended on its stdin
	// closed or SIGTERM, not at SIGKILL (which used to hold a call of its
	// connection past its timeout, 4 s later).
	if log, ok := logBuf.Await(fmt.Sprintf("echoserver pid %d ended", frozen)); !ok {
		t.Errorf("the stopped server did not end by itself or on SIGTERM once forgotten:\n%s", log)
	}
}

// killPID kills a process the test stopped (best effort: it may be gone).
func killPID(pid int) {
	if p, err := os.FindProcess(pid); err == nil {
		_ = p.Kill() // gone already is fine
	}
}

// httpEcho starts the echo server over streamable HTTP and returns its URL.
func httpEcho(t *testing.T) string {
	t.Helper()
	bin, err := echoServer()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-http", "127.0.0.1:0")
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("the HTTP echo server did not say its URL: %v", err)
	}
	return strings.TrimSpace(line)
}

// TestManagerHTTPOversizedResult: a server reached by URL that answers
// with a 64 MiB result has it cut off at the limit while it is read: the
// call is refused with a clear error, the client's memory stays bounded,
// and the connection serves the next call.
func TestManagerHTTPOversizedResult(t *testing.T) {
	m := newTestManager([]Server{{Name: "web", URL: httpEcho(t)}}, nil)
	t.Cleanup(m.Close)
	ctx := t.Context()
	if _, err := m.Call(ctx, "web.echo", map[string]any{"text": "a"}, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	var err error
	alloc := allocated(func() {
		_, err = m.Call(ctx, "web.big", map[string]any{"size": 64 << 20}, 30*time.Second)
	})
	t.Logf("big: %v; allocated %d MiB meanwhile", err, alloc>>20)
	if err == nil || !strings.Contains(err.Error(), "over pybox's limit") {
		t.Errorf("a 64 MiB result: %v; want it refused as over the limit", err)
	}
	if alloc > 16<<20 {
		t.Errorf("the client allocated %d MiB for a refused 64 MiB result; want it bounded", alloc>>20)
	}
	if res, err := m.Call(ctx, "web.echo", map[string]any{"text": "b"}, 10*time.Second); err != nil || res.IsError {
		t.Errorf("the next call: %v", err)
	}
}

// TestManagerErrorsHideSecrets: an unreachable server configured with a
// key in its URL's path and query, and in a header: what the caller (and
// so code) sees names the server and the failure, never the URL.
func TestManagerErrorsHideSecrets(t *testing.T) {
	var logBuf testenv.LogBuffer
	m := newTestManager([]Server{{Name: "web", URL: "http://127.0.0.1:1/mcp/PATHKEY?api_key=SECRET", Headers: map[string]string{"Authorization": "Bearer HDRKEY"}}},
		slog.New(slog.NewTextHandler(&logBuf, nil)))
	t.Cleanup(m.Close)
	_, callErr := m.Call(t.Context(), "web.echo", nil, 5*time.Second)
	_, listErr := m.Tools(t.Context())
	for _, err := range []error{callErr, listErr} {
		if err == nil {
			t.Fatal("an unreachable server: no error")
		}
		msg := err.Error()
		for _, secret := range []string{"SECRET", "PATHKEY", "HDRKEY", "127.0.0.1", "api_key"} {
			if strings.Contains(msg, secret) {
				t.Errorf("the error shows %q: %s", secret, msg)
			}
		}
		if !strings.Contains(msg, "web") || !strings.Contains(msg, "could not be reached") {
			t.Errorf("the error does not name the server and the failure: %s", msg)
		}
	}
	if strings.Contains(logBuf.String(), "SECRET") {
		t.Errorf("the log shows the URL's key:\n%s", logBuf.String())
	}
}

// TestManagerMinimalEnvironment: a command server gets a minimal
// environment plus its own env, not pybox's (keys, PYBOX_*, the code
// storage folder: a second pybox downstream would otherwise share the
// first one's storage and servers file).
func TestManagerMinimalEnvironment(t *testing.T) {
	t.Setenv("SOME_API_KEY", "leaked-key")
	t.Setenv("CODE_STORAGE_DIR", "/srv/tenant-b")
	t.Setenv("PYBOX_MCP_SERVERS", "/etc/pybox/servers.json")
	bin, err := echoServer()
	if err != nil {
		t.Fatal(err)
	}
	m := NewManager([]Server{{Name: "echo", Command: bin, Env: map[string]string{"OWN_SETTING": "mine"}}}, Options{Env: map[string]string{"PYBOX_PARENT_DIRS": "/p"}})
	t.Cleanup(m.Close)
	res, err := m.Call(t.Context(), "echo.env", nil, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(res.StructuredContent)
	env := string(b)
	for _, leak := range []string{"SOME_API_KEY", "CODE_STORAGE_DIR", "PYBOX_MCP"} {
		if strings.Contains(env, leak) {
			t.Errorf("the server's environment has %s: %s", leak, env)
		}
	}
	for _, want := range []string{"OWN_SETTING=mine", "PATH=", "PYBOX_PARENT_DIRS=/p"} {
		if !strings.Contains(env, want) {
			t.Errorf("the server's environment lacks %s: %s", want, env)
		}
	}
}

// newTestManager is a Manager as code mode makes it (256 KiB results).
func newTestManager(servers []Server, log *slog.Logger) *Manager {
	return NewManager(servers, Options{Log: log, Version: "test", MaxMessage: 4*(256<<10) + 1<<20})
}
