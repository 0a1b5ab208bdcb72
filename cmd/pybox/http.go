package main

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/pybox-dev/pybox/internal/app"
)

// maxHTTPBody bounds one request body: a tool call's arguments (code,
// files) travel in it.
const maxHTTPBody = 16 << 20

// serveHTTP serves MCP over streamable HTTP on c.HTTPAddr until ctx ends,
// then drains the calls in flight for up to c.ShutdownGrace and removes
// every container. With a tokens file every request needs a bearer token,
// and each token's tenant has its own code storage, sessions, environment,
// warm pool and quotas; without one there is a single tenant, and only a
// loopback address is allowed unless --insecure-no-auth.
func serveHTTP(ctx context.Context, c *config, stderr io.Writer) error {
	if c.TenantRate < 0 {
		return errors.New("tenant calls per minute must be 0 (no limit) or more")
	}
	if err := c.checkConnSettings(); err != nil {
		return err
	}
	host, _, err := net.SplitHostPort(c.HTTPAddr)
	if err != nil {
		return fmt.Errorf("--http %q: give host:port (e.g. 127.0.0.1:8080): %v", c.HTTPAddr, err)
	}
	var toks *tokenSet
	if c.TokensFile != "" {
		if toks, err = loadTokens(c.TokensFile); err != nil {
			return err
		}
	} else if !loopback(host) && !c.InsecureNoAuth {
		return fmt.Errorf("--http %s is not a loopback address and there is no --tokens file: anyone who reaches it could run code. "+
			"Give a tokens file (lines \"TENANT TOKEN\"), listen on 127.0.0.1, or pass --insecure-no-auth", c.HTTPAddr)
	}
	base, err := app.New(ctx, &c.Config, stderr)
	if err != nil {
		return err
	}
	defer base.Close()
	// In a container, the folders pybox mounts into sandboxes must be the
	// Docker host's (every tenant's are under these two).
	if err := base.CheckRoots(ctx); err != nil { // every tenant's folders are under these
		return err
	}
	stopping, stopStreams := context.WithCancel(context.Background())
	defer stopStreams()
	t := &tenants{ctx: ctx, stopping: stopping, base: base, byName: map[string]*tenantServer{}, log: base.Log}
	t.tokens.Store(toks)
	t.metrics = newMetrics(t.pools)
	base.Observe(t.metrics.tenant(""))
	defer t.close()

	ln, err := c.listen(c.HTTPAddr, base.Log)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", c.HTTPAddr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", t.mcpHandler(app.SplitList(c.AllowedOrigins)))
	mux.HandleFunc("/healthz", healthz(base))
	if toks == nil {
		mux.Handle("/metrics", promhttp.HandlerFor(t.metrics.reg, promhttp.HandlerOpts{}))
	}
	access, err := c.AccessLogger(stderr)
	if err != nil {
		return err
	}
	srv := c.httpServer(accessLog(mux, access, base.Log, t.metrics))
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	var metricsSrv *http.Server
	if c.MetricsAddr != "" {
		mln, err := c.listen(c.MetricsAddr, base.Log)
		if err != nil {
			srv.Close()
			return fmt.Errorf("listen on --metrics-addr %s: %w", c.MetricsAddr, err)
		}
		metricsSrv = c.httpServer(promhttp.HandlerFor(t.metrics.reg, promhttp.HandlerOpts{}))
		go metricsSrv.Serve(mln)
		defer metricsSrv.Close()
	}
	base.Log.Info("pybox serving MCP over streamable HTTP", "version", version, "url", "http://"+ln.Addr().String()+"/mcp",
		"tenants", toks.describe(), "image", base.Image)
	if toks != nil {
		stopReload := t.reloadOnHUP(c.TokensFile)
		defer stopReload()
	}
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	// Drain: no new connections; calls in flight finish (or the grace ends);
	// the event streams clients keep open (GET) end now.
	base.Log.Info("stopping: waiting for calls in flight", "grace", c.ShutdownGrace)
	stopStreams()
	grace, cancel := context.WithTimeout(context.Background(), c.ShutdownGrace)
	defer cancel()
	if err := srv.Shutdown(grace); err != nil {
		base.Log.Warn("calls still in flight after the grace period: they are stopped", "err", err)
		srv.Close()
	}
	return nil
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// tenant returns the tenant of token, comparing in constant time against
// every token (hashed, so lengths do not show either).
func (ts *tokenSet) tenant(token string) (string, bool) {
	sum := sha256.Sum256([]byte(token))
	found := -1
	for i := range ts.sums {
		if subtle.ConstantTimeCompare(sum[:], ts.sums[i][:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return "", false
	}
	return ts.tenants[found], true
}

// tenants holds each tenant's MCP server, made on its first request.
type tenants struct {
	ctx      context.Context
	stopping context.Context // cancelled when the server starts to stop: open event streams end
	base     *app.App
	metrics  *metrics
	log      *slog.Logger
	tokens   atomic.Pointer[tokenSet]
	mu       sync.Mutex
	byName   map[string]*tenantServer
	closed   bool
}

// tenantServer is one tenant's pybox: its app (sandbox, environment,
// storage), MCP server and streamable HTTP handler, and call quota.
type tenantServer struct {
	app      *app.App
	handler  http.Handler
	stop     func()
	rate     *rateLimit
	sessions *sessionGate
}

// get returns name's server, making it on first use ("" is the single
// tenant of a server without tokens: the base app itself).
func (t *tenants) get(name string) (*tenantServer, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if ts, ok := t.byName[name]; ok {
		return ts, nil
	}
	if t.closed {
		return nil, errors.New("the server is stopping")
	}
	if toks := t.tokens.Load(); toks != nil && !slices.Contains(toks.tenants, name) {
		return nil, errors.New("the tenant was removed") // its token was, a moment ago
	}
	a := t.base
	if name != "" {
		var err error
		if a, err = app.NewTenant(t.base, name); err != nil {
			return nil, fmt.Errorf("tenant %s: %w", name, err)
		}
		a.Observe(t.metrics.tenant(name))
	}
	srv, stop, err := a.MCPServer(t.ctx)
	if err != nil {
		if a != t.base {
			a.Sandbox.Close()
		}
		return nil, fmt.Errorf("tenant %s: %w", name, err)
	}
	ts := &tenantServer{app: a, stop: stop, rate: newRateLimit(t.base.Config.TenantRate), sessions: &sessionGate{srv: srv, max: t.base.Config.MaxMCPSessions}}
	srv.AddReceivingMiddleware(ts.quota(t.metrics))
	ts.handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{MaxRequestBodyBytes: maxHTTPBody, Logger: a.Log, SessionTimeout: t.base.Config.SessionTTL})
	t.byName[name] = ts
	t.log.Info("tenant ready", "tenant", name, "code_storage_dir", a.Config.StorageDir)
	return ts, nil
}

// pools reports each tenant's ready warm containers.
func (t *tenants) pools() map[string]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]int{}
	for name, ts := range t.byName {
		out[name] = ts.app.Sandbox.PoolReady()
	}
	return out
}

// close stops every tenant: its sessions and containers go.
func (t *tenants) close() {
	t.mu.Lock()
	t.closed = true
	all := make([]*tenantServer, 0, len(t.byName))
	for _, ts := range t.byName {
		all = append(all, ts)
	}
	t.mu.Unlock()
	var wg sync.WaitGroup
	for _, ts := range all {
		ts.app.Sandbox.Shutdown()
		wg.Go(func() {
			ts.stop()
			if ts.app != t.base {
				ts.app.CloseTenant()
			}
		})
	}
	wg.Wait()
}

// tenantKey carries the request's tenant to the access log.
type tenantKey struct{}

// mcpHandler authenticates a request (with a tokens file), checks its
// Origin, and hands it to its tenant's handler, whose sessions only that
// tenant's requests reach: another tenant's session id is unknown there.
func (t *tenants) mcpHandler(origins []string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if o := r.Header.Get("Origin"); o != "" && !slices.Contains(origins, o) {
			http.Error(w, "forbidden: requests from origin "+strconv.Quote(o)+" are not allowed (--allowed-origins)", http.StatusForbidden)
			return
		}
		name := ""
		if toks := t.tokens.Load(); toks != nil {
			token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if ok {
				name, ok = toks.tenant(strings.TrimSpace(token))
			}
			if !ok {
				w.Header().Set("WWW-Authenticate", `Bearer realm="pybox"`)
				http.Error(w, "unauthorized: a valid bearer token is required (Authorization: Bearer TOKEN)", http.StatusUnauthorized)
				return
			}
		}
		if lr, ok := w.(*loggedResponse); ok {
			lr.tenant = name
		}
		ts, err := t.get(name)
		if err != nil {
			t.log.Error("tenant not available", "tenant", name, "err", err)
			http.Error(w, "the tenant's sandbox is not available: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		limit := int64(maxHTTPBody)
		if openingSession(r) {
			release, open, ok := ts.sessions.admit()
			if !ok {
				ts.refuseSession(w, open, t.metrics)
				return
			}
			defer release()
			limit = maxInitializeBody
		}
		r.Body = http.MaxBytesReader(w, r.Body, limit)
		if r.Method == http.MethodGet { // a standing event stream: it must not hold the shutdown
			ctx, cancel := context.WithCancel(r.Context())
			defer cancel()
			defer context.AfterFunc(t.stopping, cancel)()
			r = r.WithContext(ctx)
		}
		ts.handler.ServeHTTP(w, r)
	})
}

// quota refuses a tenant's tool calls past its calls per minute, with a
// tool error that says when to try again.
func (ts *tenantServer) quota(m *metrics) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if _, ok := req.(*mcp.CallToolRequest); !ok {
				return next(ctx, method, req)
			}
			if wait, ok := ts.rate.take(time.Now()); !ok {
				m.refused.WithLabelValues(ts.app.Tenant(), "calls_per_minute").Inc()
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(
					"quota: this tenant may make %d tool calls per minute and has made them; nothing was run — try again in %.0f s",
					ts.rate.perMinute, max(1, wait.Seconds()))}}}, nil
			}
			return next(ctx, method, req)
		}
	}
}

// rateLimit is a token bucket of perMinute calls, refilled continuously.
type rateLimit struct {
	perMinute int
	mu        sync.Mutex
	tokens    float64
	last      time.Time
}

func newRateLimit(perMinute int) *rateLimit {
	return &rateLimit{perMinute: perMinute, tokens: float64(perMinute)}
}

// take spends one call, or says how long until one is available.
func (r *rateLimit) take(now time.Time) (time.Duration, bool) {
	if r.perMinute <= 0 {
		return 0, true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	rate := float64(r.perMinute) / 60 // per second
	if !r.last.IsZero() {
		r.tokens = min(float64(r.perMinute), r.tokens+now.Sub(r.last).Seconds()*rate)
	}
	r.last = now
	if r.tokens >= 1 {
		r.tokens--
		return 0, true
	}
	return time.Duration((1 - r.tokens) / rate * float64(time.Second)), false
}

// healthz answers 200 when a can run programs (app.App.Health), else
// 503, with a JSON body saying which part failed.
func healthz(a *app.App) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		out, ok := a.Health(r.Context())
		code := http.StatusOK
		if !ok {
			code = http.StatusServiceUnavailable
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		json.NewEncoder(w).Encode(out)
	}
}

// loggedResponse notes a response's status for the access log; it keeps
// the streaming (Flush) that server-sent events need.
type loggedResponse struct {
	http.ResponseWriter
	status int
	tenant string
}

func (l *loggedResponse) WriteHeader(code int) {
	if l.status == 0 {
		l.status = code
	}
	l.ResponseWriter.WriteHeader(code)
}

func (l *loggedResponse) Write(b []byte) (int, error) {
	if l.status == 0 {
		l.status = http.StatusOK
	}
	return l.ResponseWriter.Write(b)
}

func (l *loggedResponse) Flush() {
	if f, ok := l.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (l *loggedResponse) Unwrap() http.ResponseWriter { return l.ResponseWriter }

// accessLog logs every request on stderr (structured: method, path,
// status, tenant, duration, remote address) and counts it. Refused
// requests (4xx, 5xx), which anyone can send, go through the bounded
// logger; the others are a tenant's, bounded by its quotas.
func accessLog(h http.Handler, access, bounded *slog.Logger, m *metrics) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		lr := &loggedResponse{ResponseWriter: w}
		h.ServeHTTP(lr, r)
		if lr.status == 0 {
			lr.status = http.StatusOK
		}
		m.requests.WithLabelValues(strconv.Itoa(lr.status)).Inc()
		log := access
		if lr.status >= 400 {
			log = bounded
		}
		log.Info("http", "method", r.Method, "path", r.URL.Path, "status", lr.status, "tenant", lr.tenant,
			"ms", sinceMS(start), "remote", r.RemoteAddr, "mcp_session", r.Header.Get("Mcp-Session-Id") != "")
	})
}
