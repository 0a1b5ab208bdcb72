//go:build !windows

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
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
)

// httpServer is a running `pybox serve --http`.
type httpServer struct {
	t       *testing.T
	cmd     *exec.Cmd
	url     string // http://127.0.0.1:PORT
	storage string
	state   string
	tokens  string // the tokens file ("" = none)
	stderr  *testenv.LogBuffer
	eng     *engine.Client
	exited  chan error
}

// Tokens of the tests' tenants.
const (
	tokenA = "token-of-tenant-a-0123456789"
	tokenB = "token-of-tenant-b-0123456789"
)

// startHTTP starts `pybox serve --http 127.0.0.1:PORT` with a tokens file
// holding tenants a and b (unless noTokens), and waits for /healthz.
func startHTTP(t *testing.T, noTokens bool, env ...string) *httpServer {
	t.Helper()
	eng := testenv.Docker(t)
	testenv.RuntimeImage(t, eng, "base")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	h := &httpServer{t: t, url: "http://" + addr, storage: t.TempDir(), state: t.TempDir(), stderr: &testenv.LogBuffer{}, eng: eng, exited: make(chan error, 1)}
	args := []string{"serve", "--http", addr}
	if !noTokens {
		h.tokens = filepath.Join(t.TempDir(), "tokens")
		os.WriteFile(h.tokens, []byte("# tenants\na "+tokenA+"\nb "+tokenB+"\n"), 0o600)
		args = append(args, "--tokens", h.tokens)
	}
	h.cmd = exec.Command(pyboxBin, args...)
	h.cmd.Env = append(append(os.Environ(), "CODE_STORAGE_DIR="+h.storage, "PYBOX_STATE_DIR="+h.state, "PYBOX_BUILD=never"), env...)
	h.cmd.Stderr = h.stderr
	if err := h.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { h.exited <- h.cmd.Wait() }()
	t.Cleanup(h.stop)
	deadline := time.Now().Add(2 * time.Minute) // on Kubernetes, after the start checks' two pods
	for {
		resp, err := http.Get(h.url + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return h
			}
		}
		select {
		case err := <-h.exited:
			t.Fatalf("pybox serve --http exited: %v\n%s", err, h.stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no healthy /healthz within 2 minutes: %v\n%s", err, h.stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop ends the server with SIGTERM and checks that it exits and leaves
// no container.
func (h *httpServer) stop() {
	if h.cmd.ProcessState == nil {
		h.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-h.exited:
		case <-time.After(60 * time.Second):
			h.cmd.Process.Kill()
			<-h.exited
			h.t.Errorf("the server did not exit within 60 s of SIGTERM")
		}
	}
	if left := h.containers(); len(left) > 0 {
		h.t.Errorf("containers left after the HTTP server stopped: %v", left)
	}
	if h.t.Failed() {
		h.t.Logf("server stderr:\n%s", h.stderr)
	}
}

func (h *httpServer) containers() []engine.Summary {
	return testenv.Managed(h.t, h.eng, map[string]string{"pybox.pid": strconv.Itoa(h.cmd.Process.Pid)})
}

// bearer adds a token to every request.
type bearer struct {
	token string
	base  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.token != "" {
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return b.base.RoundTrip(r)
}

// connect opens an MCP session with the Go SDK's streamable HTTP client.
func (h *httpServer) connect(token string) *mcp.ClientSession {
	h.t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "pybox-http-e2e", Version: "test"}, nil)
	cs, err := client.Connect(h.t.Context(), &mcp.StreamableClientTransport{Endpoint: h.url + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{token, http.DefaultTransport}}}, nil)
	if err != nil {
		h.t.Fatalf("connect over HTTP: %v\n%s", err, h.stderr)
	}
	h.t.Cleanup(func() { cs.Close() })
	return cs
}

// callOK calls a tool and returns its text, failing on a protocol error.
func callOK(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (*mcp.CallToolResult, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	return res, text(res)
}

// rawPost sends one JSON-RPC message to /mcp as a client would.
func (h *httpServer) rawPost(token, origin, session, body string) (int, string) {
	h.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, h.url+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return resp.StatusCode, string(b)
}

const initializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// TestHTTPAuth: without a token or with a wrong one, 401; a foreign
// Origin, 403; another tenant's MCP session id, 404; the right token works.
func TestHTTPAuth(t *testing.T) {
	parallelTest(t)
	h := startHTTP(t, false)
	for _, tc := range []struct {
		name, token, origin string
		want                int
	}{
		{"no token", "", "", http.StatusUnauthorized},
		{"wrong token", "token-of-nobody-000000000000", "", http.StatusUnauthorized},
		{"a prefix of a token", tokenA[:20], "", http.StatusUnauthorized},
		{"foreign origin", tokenA, "http://evil.example", http.StatusForbidden},
		{"right token", tokenA, "", http.StatusOK},
	} {
		if code, body := h.rawPost(tc.token, tc.origin, "", initializeBody); code != tc.want {
			t.Errorf("%s: HTTP %d (%s); want %d", tc.name, code, strings.TrimSpace(body), tc.want)
		}
	}
	// A's MCP session, used with B's token: unknown to B (404), and A's
	// still works.
	csA := h.connect(tokenA)
	if _, out := callOK(t, csA, "execute_code", map[string]any{"code": "print('a')"}); !strings.Contains(out, "a\n") {
		t.Fatalf("tenant a: %s", out)
	}
	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	if code, body := h.rawPost(tokenB, "", csA.ID(), list); code != http.StatusNotFound {
		t.Errorf("tenant b with a's session id: HTTP %d %s; want 404", code, body)
	}
	if code, body := h.rawPost(tokenA, "", csA.ID(), list); code != http.StatusOK {
		t.Errorf("tenant a with its own session id: HTTP %d %s", code, body)
	}
	if strings.Contains(h.stderr.String(), tokenA) || strings.Contains(h.stderr.String(), tokenB) {
		t.Errorf("a token appears in the server's log")
	}
}

// TestHTTPTenantsIsolated: tenant b can neither see nor touch anything of
// tenant a's through any tool: files, code files, sessions, the
// environment and its packages; and each reads back only its own.
func TestHTTPTenantsIsolated(t *testing.T) {
	parallelTest(t)
	pkg, wh := testenv.OwnPackage(t, testenv.Docker(t)) // its own: no layer-cache lock
	h := startHTTP(t, false, "PYBOX_WHEELHOUSE="+wh, "PYBOX_INSTALL_NETWORK=none", "PYBOX_TOOLSET=all")
	a, b := h.connect(tokenA), h.connect(tokenB)
	// Tenant a makes one of everything.
	steps := []struct {
		tool string
		args map[string]any
	}{
		{"write_file", map[string]any{"path": "secret.txt", "content": "a's secret"}},
		{"initialize_code_file", map[string]any{"content": "A_VALUE = 1\n", "filename": "a_prog"}},
		{"execute_code", map[string]any{"code": "x = 'a in session'", "session_id": "shared-name"}},
		{"install_dependencies", map[string]any{"packages": []string{pkg}}},
	}
	var codeFile string
	for _, st := range steps {
		res, out := callOK(t, a, st.tool, st.args)
		if res.IsError {
			t.Fatalf("tenant a, %s: %s", st.tool, out)
		}
		if st.tool == "initialize_code_file" {
			var o map[string]any
			b, _ := json.Marshal(res.StructuredContent)
			json.Unmarshal(b, &o)
			codeFile, _ = o["file_path"].(string)
		}
	}
	if codeFile == "" {
		t.Fatal("initialize_code_file gave no file_path")
	}
	// Tenant b, with the same names.
	expectNot := func(tool string, args map[string]any, leak ...string) {
		t.Helper()
		res, out := callOK(t, b, tool, args)
		for _, l := range leak {
			if strings.Contains(out, l) {
				t.Errorf("tenant b, %s %v: sees a's %q: %s (error=%v)", tool, args, l, out, res.IsError)
			}
		}
	}
	expectNot("list_files", map[string]any{}, "secret.txt", filepath.Base(codeFile))
	expectNot("read_file", map[string]any{"path": "secret.txt"}, "a's secret")
	expectNot("read_code_file", map[string]any{"file_path": codeFile}, "A_VALUE")
	expectNot("append_to_code_file", map[string]any{"file_path": codeFile, "content": "B = 2\n"}, "A_VALUE")
	expectNot("execute_code_file", map[string]any{"file_path": codeFile}, "A_VALUE")
	expectNot("execute_code", map[string]any{"code": "import glob; print(glob.glob('/workspace/**', recursive=True)); print(open('secret.txt').read())"}, "a's secret", "a_prog")
	expectNot("list_sessions", map[string]any{}, "shared-name")
	expectNot("execute_code", map[string]any{"code": "print(globals().get('x'))", "session_id": "shared-name"}, "a in session")
	expectNot("get_environment_config", map[string]any{}, pkg)
	expectNot("check_installed_packages", map[string]any{"packages": []string{pkg}}, "installed (version", `"installed":true`)
	expectNot("execute_code", map[string]any{"code": "import " + pkg + "; print('ANSWER', " + pkg + ".answer())"}, "ANSWER 42")
	expectNot("close_session", map[string]any{"session_id": "shared-name"})
	expectNot("configure_environment", map[string]any{"type": "venv-uv"})
	// a's things are all still a's, unchanged by b.
	if _, out := callOK(t, a, "read_file", map[string]any{"path": "secret.txt"}); !strings.Contains(out, "a's secret") {
		t.Errorf("tenant a lost its file: %s", out)
	}
	if _, out := callOK(t, a, "read_code_file", map[string]any{"file_path": codeFile}); !strings.Contains(out, "A_VALUE = 1") || strings.Contains(out, "B = 2") {
		t.Errorf("tenant a's code file: %s", out)
	}
	if _, out := callOK(t, a, "execute_code", map[string]any{"code": "print(x)", "session_id": "shared-name"}); !strings.Contains(out, "a in session") {
		t.Errorf("tenant a's session after b's calls: %s", out)
	}
	if _, out := callOK(t, a, "execute_code", map[string]any{"code": "import " + pkg + "; print(" + pkg + ".answer())"}); !strings.Contains(out, "42") {
		t.Errorf("tenant a's package after b's calls: %s", out)
	}
	// On disk: each tenant's files under its own folder.
	if _, err := os.Stat(filepath.Join(h.storage, "tenants", "a", "secret.txt")); err != nil {
		t.Errorf("tenant a's file is not in its folder: %v", err)
	}
	if _, err := os.Stat(filepath.Join(h.storage, "tenants", "b", "secret.txt")); err == nil {
		t.Errorf("tenant a's file is in tenant b's folder")
	}
}

// TestHTTPQuotas: past its calls per minute, its sessions or its
// programs at once, a tenant gets a clear error; another tenant does not
// feel it.
func TestHTTPQuotas(t *testing.T) {
	parallelTest(t)
	h := startHTTP(t, false, "PYBOX_TENANT_CALLS_PER_MINUTE=5", "PYBOX_MAX_SESSIONS=1", "PYBOX_MAX_CONCURRENT=1", "PYBOX_QUEUE_WAIT=1s", "PYBOX_WORKSPACE_QUOTA=2m")
	a, b := h.connect(tokenA), h.connect(tokenB)
	first := time.Now() // a's calls per minute count from here
	// Storage: 2 MiB per workspace.
	if res, out := callOK(t, a, "write_file", map[string]any{"path": "big.txt", "content": strings.Repeat("x", 3<<20)}); !res.IsError || !strings.Contains(out, "quota") {
		t.Errorf("3 MiB into a tenant's 2 MiB workspace: %.300s", out)
	}
	// Sessions: one.
	if res, out := callOK(t, a, "execute_code", map[string]any{"code": "v = 1", "session_id": "one"}); res.IsError {
		t.Fatalf("first session: %s", out)
	}
	if res, out := callOK(t, a, "execute_code", map[string]any{"code": "v = 2", "session_id": "two"}); !res.IsError || !strings.Contains(out, "session") {
		t.Errorf("a second session past the limit of 1: %s", out)
	}
	// Programs at once: one. While the first holds the slot (until the test
	// lets it go), the second waits 1 s, then is refused.
	ws := filepath.Join(h.storage, "tenants", "a")
	held := holding(t, a, ws)
	res, out := callOK(t, a, "execute_code", map[string]any{"code": "print(1)"})
	release(t, ws)
	if !res.IsError || !strings.Contains(out, "busy") {
		t.Errorf("a program past the tenant's programs at once: %s", out)
	}
	if out := <-held; !strings.Contains(out, "held") {
		t.Errorf("the program holding the slot: %s", out)
	}
	// Calls per minute: 5, refilled continuously (one per 12 s). a has made
	// 5; calls in quick succession are refused once the refill since its
	// first is spent, and never later: within 6, whatever the load.
	refused := 0
	for n := 1; n <= 6 && refused == 0; n++ {
		res, out := callOK(t, a, "list_files", map[string]any{})
		switch {
		case res.IsError && strings.Contains(out, "5 tool calls per minute"):
			refused = n
		case res.IsError:
			t.Fatalf("list_files: %s", out)
		}
	}
	elapsed := time.Since(first)
	made, allowed := 5+refused-1, 5+int(elapsed.Seconds()*5/60)
	if refused == 0 || made > allowed {
		t.Errorf("calls per minute: %d calls went through in %v (refused at burst call %d); want at most %d (5 and the refill)", made, elapsed.Round(time.Millisecond), refused, allowed)
	}
	// b is not affected.
	if res, out := callOK(t, b, "execute_code", map[string]any{"code": "print('b ok')"}); res.IsError || !strings.Contains(out, "b ok") {
		t.Errorf("tenant b while a is over its quotas: %s", out)
	}
}

// holdUntilReleased marks that it runs (the file "holding" in its
// workspace), then holds its place until the test writes "release" there
// (see release), up to two minutes, and prints "held".
const holdUntilReleased = `import os, time
open("holding", "w").close()
for _ in range(2400):
    if os.path.exists("release"):
        break
    time.sleep(0.05)
print("held")
`

// holding runs holdUntilReleased through cs and returns once it runs (its
// mark in workspace dir ws): the channel gets its result's text (or the
// call's error) when it ends.
func holding(t *testing.T, cs *mcp.ClientSession, ws string) <-chan string {
	t.Helper()
	out := make(chan string, 1)
	go func() {
		res, err := cs.CallTool(t.Context(), callParams("execute_code", map[string]any{"code": holdUntilReleased, "timeout_s": 150}))
		if err != nil {
			out <- "protocol error: " + err.Error()
			return
		}
		out <- text(res)
	}()
	waitFile(t, filepath.Join(ws, "holding"))
	return out
}

// release lets a holdUntilReleased program in workspace dir end.
func release(t *testing.T, dir string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestHTTPConcurrentClients: 20 clients (two tenants) call execute_code
// over HTTP at once, each httpClientCalls times in a row: every call gets its
// own output, and no container is left. A count, not a length of time: on a
// suite bound by CPU, a test that calls for a minute takes a minute of both
// cores whatever it proves (alone here it made ~500 calls in 60 s, inside
// the suite 72).
func TestHTTPConcurrentClients(t *testing.T) {
	longTest(t)
	h := startHTTP(t, false)
	var wg sync.WaitGroup
	var mu sync.Mutex
	calls, failures := 0, 0
	start := time.Now()
	for i := range httpClients {
		token := tokenA
		if i%2 == 1 {
			token = tokenB
		}
		cs := h.connect(token)
		wg.Go(func() {
			for n := range httpClientCalls {
				want := fmt.Sprintf("client %d call %d", i, n)
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "execute_code", Arguments: map[string]any{"code": fmt.Sprintf("print(%q)", want)}})
				cancel()
				mu.Lock()
				calls++
				if err != nil || res.IsError || !strings.Contains(text(res), want) {
					if failures++; failures <= 5 {
						msg := fmt.Sprint(err)
						if res != nil {
							msg = text(res)
						}
						t.Errorf("client %d call %d: %.300s", i, n, msg)
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	t.Logf("%d clients: %d calls in %v, %d failed (%.1f calls/s)", httpClients, calls, took.Round(time.Millisecond), failures, float64(calls)/took.Seconds())
	if calls != httpClients*httpClientCalls {
		t.Errorf("%d calls made; want %d", calls, httpClients*httpClientCalls)
	}
}

// The clients of TestHTTPConcurrentClients, and the calls each makes.
const (
	httpClients     = 20
	httpClientCalls = 5
)

// TestHTTPServing: SIGHUP reloads the tokens (a new token works, a removed
// one gets 401, also when another line is broken); /metrics counts runs per tenant (on --metrics-addr when
// there are tokens); SIGTERM lets a call in flight finish, then exits with
// nothing left behind.
func TestHTTPServing(t *testing.T) {
	parallelTest(t)
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	metricsAddr := ln.Addr().String()
	ln.Close()
	h := startHTTP(t, false, "PYBOX_METRICS_ADDR="+metricsAddr)
	a := h.connect(tokenA)
	callOK(t, a, "execute_code", map[string]any{"code": "print(1)"})
	callOK(t, a, "execute_code", map[string]any{"code": "raise SystemExit(3)"})
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`pybox_runs_total{outcome="ok",tenant="a"} 1`, `pybox_runs_total{outcome="exit",tenant="a"} 1`,
		`pybox_run_duration_seconds_count{path=`, `pybox_http_requests_total{code="200"}`, `pybox_pool_ready{tenant="a"}`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if code, _ := h.rawPost("", "", "", ""); code != http.StatusUnauthorized {
		t.Errorf("metrics are not on the MCP listener's auth-free side: %d", code)
	}
	if resp, err := http.Get(h.url + "/metrics"); err == nil {
		if resp.StatusCode == http.StatusOK {
			t.Errorf("/metrics (every tenant's names and counts) served on the tenants' listener")
		}
		resp.Body.Close()
	}
	// SIGHUP: c replaces b.
	os.WriteFile(h.tokens, []byte("a "+tokenA+"\nc token-of-tenant-c-0123456789\n"), 0o600)
	h.cmd.Process.Signal(syscall.SIGHUP)
	deadline := time.Now().Add(10 * time.Second)
	for {
		codeB, _ := h.rawPost(tokenB, "", "", initializeBody)
		codeC, _ := h.rawPost("token-of-tenant-c-0123456789", "", "", initializeBody)
		if codeB == http.StatusUnauthorized && codeC == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after SIGHUP: b %d, c %d; want 401 and 200", codeB, codeC)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// A broken line is refused; the file's valid lines apply (c, left
	// out, is revoked; a stays).
	os.WriteFile(h.tokens, []byte("not a valid line at all\na "+tokenA+"\n"), 0o600)
	h.cmd.Process.Signal(syscall.SIGHUP)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if code, _ := h.rawPost("token-of-tenant-c-0123456789", "", "", initializeBody); code == http.StatusUnauthorized {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a tokens file with a broken line on SIGHUP: the revoked token of c still works")
		}
	}
	if code, _ := h.rawPost(tokenA, "", "", initializeBody); code != http.StatusOK {
		t.Errorf("a tokens file with a broken line on SIGHUP locked tenant a out: %d", code)
	}
	// SIGTERM with a call in flight: it finishes (its program ends after
	// the signal, when the test lets it), then the server exits.
	ws := filepath.Join(h.storage, "tenants", "a")
	got := holding(t, a, ws)
	h.cmd.Process.Signal(syscall.SIGTERM)
	if _, ok := h.stderr.Await("stopping: waiting for calls in flight"); !ok {
		t.Errorf("the server did not say it waits for the call in flight after SIGTERM")
	}
	release(t, ws)
	select {
	case out := <-got:
		if !strings.Contains(out, "held") {
			t.Errorf("the call in flight at SIGTERM: %s", out)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the call in flight at SIGTERM did not end")
	}
	select {
	case <-h.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("the server did not exit after SIGTERM")
	}
}

// TestHTTPRefusesOpenWithoutTokens: a non-loopback address without tokens
// refuses to start, naming the way out.
func TestHTTPRefusesOpenWithoutTokens(t *testing.T) {
	parallelTest(t)
	cmd := exec.Command(pyboxBin, "serve", "--http", "0.0.0.0:0")
	cmd.Env = append(os.Environ(), "PYBOX_BUILD=never", "PYBOX_STATE_DIR="+t.TempDir(), "CODE_STORAGE_DIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || !bytes.Contains(out, []byte("--insecure-no-auth")) || !bytes.Contains(out, []byte("tokens")) {
		t.Errorf("serve --http 0.0.0.0:0 without tokens: %v\n%s", err, out)
	}
	bad := filepath.Join(t.TempDir(), "tokens")
	os.WriteFile(bad, []byte("a short\n"), 0o600)
	cmd = exec.Command(pyboxBin, "serve", "--http", "127.0.0.1:0", "--tokens", bad)
	cmd.Env = append(os.Environ(), "PYBOX_BUILD=never", "PYBOX_STATE_DIR="+t.TempDir(), "CODE_STORAGE_DIR="+t.TempDir())
	if out, err := cmd.CombinedOutput(); err == nil || !bytes.Contains(out, []byte("line 1")) || !bytes.Contains(out, []byte("at least 16")) {
		t.Errorf("a tokens file with a short token: %v\n%s", err, out)
	}
}
