package serve

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/pybox-dev/pybox/internal/app"
	"github.com/pybox-dev/pybox/sandbox"
)

// fakeApp is a tenant's app without Docker: an MCP server with one tool
// that names the tenant, and a record of how it was ended.
type fakeApp struct {
	name string
	obs  app.Observer

	mu                 sync.Mutex
	shutdowns, closes  int
	servers, stoppedAt int
}

func (f *fakeApp) MCPServer(context.Context) (*mcp.Server, func(), error) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "fake", Version: "test"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "whoami"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		if f.obs != nil {
			f.obs.Run("warm", sandbox.Result{}, nil)
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "tenant=" + f.name}}}, nil, nil
	})
	f.mu.Lock()
	f.servers++
	f.mu.Unlock()
	return srv, func() { f.mu.Lock(); f.stoppedAt++; f.mu.Unlock() }, nil
}

func (f *fakeApp) Tenant() string         { return f.name }
func (f *fakeApp) Observe(o app.Observer) { f.obs = o }
func (f *fakeApp) PoolReady() int         { return 2 }
func (f *fakeApp) Shutdown()              { f.mu.Lock(); f.shutdowns++; f.mu.Unlock() }
func (f *fakeApp) CloseTenant()           { f.mu.Lock(); f.closes++; f.mu.Unlock() }

func (f *fakeApp) ended() (shutdowns, closes, stopped int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.shutdowns, f.closes, f.stoppedAt
}

// fakeTenants is a tenants over fake apps, served by an httptest server
// with the tokens file's lines (nil: no tokens, the base app only).
type fakeTenants struct {
	*tenants
	url  string
	file string
	mu   sync.Mutex
	made map[string]*fakeApp
	base *fakeApp
	cfg  *app.Config
	stop context.CancelFunc
}

func newFakeTenants(t *testing.T, cfg app.Config, lines ...string) *fakeTenants {
	t.Helper()
	ft := &fakeTenants{made: map[string]*fakeApp{}, base: &fakeApp{}, cfg: &cfg}
	stopping, stop := context.WithCancel(context.Background())
	ft.stop = stop
	tt := &tenants{ctx: t.Context(), stopping: stopping, base: ft.base, cfg: ft.cfg, byName: map[string]*tenantServer{},
		log: slog.New(slog.DiscardHandler), newTenant: func(name string) (Tenant, error) {
			ft.mu.Lock()
			defer ft.mu.Unlock()
			a := &fakeApp{name: name}
			ft.made[name] = a
			return a, nil
		}}
	if lines != nil {
		ft.file = filepath.Join(t.TempDir(), "tokens")
		writeFile(t, ft.file, strings.Join(lines, "\n"))
		toks, err := loadTokens(ft.file)
		if err != nil {
			t.Fatal(err)
		}
		tt.tokens.Store(toks)
	}
	tt.metrics = newMetrics(tt.pools)
	ft.base.Observe(tt.metrics.tenant(""))
	ft.tenants = tt
	mux := http.NewServeMux()
	mux.Handle("/mcp", tt.mcpHandler([]string{"https://allowed.example"}))
	srv := httptest.NewServer(accessLog(mux, tt.log, tt.log, tt.metrics))
	t.Cleanup(func() { stop(); srv.Close(); tt.close() })
	ft.url = srv.URL + "/mcp"
	return ft
}

func (ft *fakeTenants) app(name string) *fakeApp {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	return ft.made[name]
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// bearerToken adds a bearer token to every request.
type bearerToken string

func (b bearerToken) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}

// connect opens an MCP session with token ("": none).
func (ft *fakeTenants) connect(t *testing.T, token string) (*mcp.ClientSession, error) {
	t.Helper()
	hc := &http.Client{Transport: http.DefaultTransport}
	if token != "" {
		hc.Transport = bearerToken(token)
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "serve-test", Version: "test"}, nil)
	cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: ft.url, HTTPClient: hc}, nil)
	if err == nil {
		t.Cleanup(func() { cs.Close() })
	}
	return cs, err
}

func whoami(t *testing.T, cs *mcp.ClientSession) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "whoami", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func resultText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

const (
	tokenA = "token-of-tenant-a-0123456789"
	tokenB = "token-of-tenant-b-0123456789"
)

func quotas() app.Config {
	return app.Config{TenantRate: 0, MaxMCPSessions: 8}
}

// TestTenantsAuth: with a tokens file, a request without a token or with
// a wrong one is refused (401, naming the scheme) and makes no tenant; a
// token reaches its own tenant's server, and only that one.
func TestTenantsAuth(t *testing.T) {
	ft := newFakeTenants(t, quotas(), "a "+tokenA, "b "+tokenB)
	for _, token := range []string{"", "not-a-token-of-anyone-000"} {
		req, _ := http.NewRequest(http.MethodPost, ft.url, strings.NewReader(`{}`))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(resp.Header.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("token %q: status %d, WWW-Authenticate %q; want 401 and Bearer", token, resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
		}
	}
	if ft.app("a") != nil || ft.app("b") != nil {
		t.Fatal("a refused request made a tenant")
	}
	for token, want := range map[string]string{tokenA: "tenant=a", tokenB: "tenant=b"} {
		cs, err := ft.connect(t, token)
		if err != nil {
			t.Fatal(err)
		}
		if got := resultText(whoami(t, cs)); got != want {
			t.Errorf("whoami = %q; want %q", got, want)
		}
	}
}

// TestTenantsSessionsAreTheirOwn: one tenant's MCP session id is unknown
// to another tenant's server.
func TestTenantsSessionsAreTheirOwn(t *testing.T) {
	ft := newFakeTenants(t, quotas(), "a "+tokenA, "b "+tokenB)
	cs, err := ft.connect(t, tokenA)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ft.connect(t, tokenB); err != nil {
		t.Fatal(err)
	}
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"whoami","arguments":{}}}`
	req, _ := http.NewRequest(http.MethodPost, ft.url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tokenB)
	req.Header.Set("Mcp-Session-Id", cs.ID())
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || strings.Contains(string(got), "tenant=a") {
		t.Errorf("b with a's session: status %d, body %q; want 404 and nothing of a's", resp.StatusCode, got)
	}
}

// TestTenantsOrigin: a browser's request from an origin not allowed is
// refused before authentication.
func TestTenantsOrigin(t *testing.T) {
	ft := newFakeTenants(t, quotas(), "a "+tokenA)
	for origin, want := range map[string]int{"https://evil.example": http.StatusForbidden, "https://allowed.example": http.StatusUnauthorized} {
		req, _ := http.NewRequest(http.MethodPost, ft.url, strings.NewReader(`{}`))
		req.Header.Set("Origin", origin)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("origin %s: status %d; want %d", origin, resp.StatusCode, want)
		}
	}
}

// TestTenantsReloadRemovesGone: a tenant whose token left the tokens
// file is ended (its runs stopped, its app closed) and its token no
// longer works; the others stay.
func TestTenantsReloadRemovesGone(t *testing.T) {
	ft := newFakeTenants(t, quotas(), "a "+tokenA, "b "+tokenB)
	for _, tok := range []string{tokenA, tokenB} {
		cs, err := ft.connect(t, tok)
		if err != nil {
			t.Fatal(err)
		}
		whoami(t, cs)
	}
	writeFile(t, ft.file, "a "+tokenA+"\nbroken line\n")
	ft.reload(ft.file)
	if sh, cl, st := ft.app("b").ended(); sh != 1 || cl != 1 || st != 1 {
		t.Errorf("b after its token went: shutdowns %d, closes %d, servers stopped %d; want 1 each", sh, cl, st)
	}
	if sh, cl, st := ft.app("a").ended(); sh+cl+st != 0 {
		t.Errorf("a, still in the file, was ended: %d %d %d", sh, cl, st)
	}
	if _, err := ft.connect(t, tokenB); err == nil {
		t.Error("b's removed token still connects")
	}
	if cs, err := ft.connect(t, tokenA); err != nil {
		t.Errorf("a after the reload: %v", err)
	} else if got := resultText(whoami(t, cs)); got != "tenant=a" {
		t.Errorf("a after the reload: whoami = %q", got)
	}
}

// TestTenantsCallQuota: past its calls per minute a tenant's tool call is
// a tool error that says so and runs nothing; it is counted as refused,
// and another tenant's calls are not affected.
func TestTenantsCallQuota(t *testing.T) {
	cfg := quotas()
	cfg.TenantRate = 2
	ft := newFakeTenants(t, cfg, "a "+tokenA, "b "+tokenB)
	cs, err := ft.connect(t, tokenA)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if res := whoami(t, cs); res.IsError {
			t.Fatalf("call %d refused: %s", i+1, resultText(res))
		}
	}
	res := whoami(t, cs)
	if !res.IsError || !strings.Contains(resultText(res), "quota: this tenant may make 2 tool calls per minute") {
		t.Errorf("third call: error %v, %q; want the quota's refusal", res.IsError, resultText(res))
	}
	if got := count(t, ft.metrics.refused.WithLabelValues("a", "calls_per_minute")); got != 1 {
		t.Errorf("refused calls counted: %v; want 1", got)
	}
	if got := count(t, ft.metrics.runs.WithLabelValues("a", "ok")); got != 2 {
		t.Errorf("runs counted for a: %v; want the 2 that ran", got)
	}
	csB, err := ft.connect(t, tokenB)
	if err != nil {
		t.Fatal(err)
	}
	if res := whoami(t, csB); res.IsError {
		t.Errorf("b refused by a's quota: %s", resultText(res))
	}
}

// TestTenantsSessionCap: a tenant's MCP session past --max-mcp-sessions
// is refused with 429 and Retry-After, before its body is read; closing
// one makes room.
func TestTenantsSessionCap(t *testing.T) {
	cfg := quotas()
	cfg.MaxMCPSessions = 1
	ft := newFakeTenants(t, cfg, "a "+tokenA)
	post := func(method, session string) *http.Response {
		t.Helper()
		body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`
		req, _ := http.NewRequest(method, ft.url, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tokenA)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	first := post(http.MethodPost, "")
	session := first.Header.Get("Mcp-Session-Id")
	if first.StatusCode != http.StatusOK || session == "" {
		t.Fatalf("first session: status %d, id %q", first.StatusCode, session)
	}
	resp := post(http.MethodPost, "")
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Errorf("second session: status %d, Retry-After %q; want 429 and a delay", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if got := count(t, ft.metrics.refused.WithLabelValues("a", "mcp_sessions")); got != 1 {
		t.Errorf("refused sessions counted: %v; want 1", got)
	}
	post(http.MethodDelete, session)
	ts, err := ft.get("a")
	if err != nil {
		t.Fatal(err)
	}
	if n := open(ts); n != 0 {
		t.Fatalf("%d sessions open after the DELETE", n)
	}
	if resp := post(http.MethodPost, ""); resp.StatusCode != http.StatusOK {
		t.Errorf("a session after the first was closed: status %d", resp.StatusCode)
	}
}

// TestTenantsCloseEndsEveryone: stopping the server shuts every tenant
// down and closes each tenant's app, but not the base app (its owner
// closes it); no tenant is made after.
func TestTenantsCloseEndsEveryone(t *testing.T) {
	ft := newFakeTenants(t, quotas(), "a "+tokenA, "b "+tokenB, "c token-of-tenant-c-0123456789")
	for _, tok := range []string{tokenA, tokenB} {
		if _, err := ft.connect(t, tok); err != nil {
			t.Fatal(err)
		}
	}
	ft.close()
	for _, name := range []string{"a", "b"} {
		if sh, cl, st := ft.app(name).ended(); sh != 1 || cl != 1 || st != 1 {
			t.Errorf("%s after close: shutdowns %d, closes %d, servers stopped %d; want 1 each", name, sh, cl, st)
		}
	}
	if _, err := ft.get("c"); err == nil || ft.app("c") != nil {
		t.Errorf("a new tenant was made after the server stopped (err %v)", err)
	}
	if sh, cl, st := ft.base.ended(); cl != 0 {
		t.Errorf("the base app was closed by the tenants (shutdowns %d, closes %d, stopped %d); its owner closes it", sh, cl, st)
	}
}

// TestHealthz: 200 when the app can run programs, else 503; the body
// says which part.
func TestHealthz(t *testing.T) {
	for _, tc := range []struct {
		ok   bool
		want int
	}{{true, http.StatusOK}, {false, http.StatusServiceUnavailable}} {
		rec := httptest.NewRecorder()
		healthz(fakeHealth{tc.ok}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
		if rec.Code != tc.want || !strings.Contains(rec.Body.String(), `"docker":`) || rec.Header().Get("Content-Type") != "application/json" {
			t.Errorf("healthy %v: %d %q; want %d and the report", tc.ok, rec.Code, rec.Body.String(), tc.want)
		}
	}
}

type fakeHealth struct{ ok bool }

func (f fakeHealth) Health(context.Context) (map[string]string, bool) {
	if f.ok {
		return map[string]string{"docker": "ok"}, true
	}
	return map[string]string{"docker": "the daemon does not answer"}, false
}

// count is a counter's value.
func count(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// open counts the MCP sessions ts's server holds.
func open(ts *tenantServer) (n int) {
	for range ts.sessions.srv.Sessions() {
		n++
	}
	return n
}
