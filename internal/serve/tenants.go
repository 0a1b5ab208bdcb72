package serve

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pybox-dev/pybox/internal/app"
)

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

// Tenant is what the HTTP layer needs of one tenant's app (*app.App has
// it): its MCP server, its name, and its end.
type Tenant interface {
	// MCPServer makes its MCP server; stop releases what that opened.
	MCPServer(ctx context.Context) (srv *mcp.Server, stop func(), err error)
	// Tenant is its name ("" for the single tenant of a server without tokens).
	Tenant() string
	// Observe has its runs and installs counted (before MCPServer).
	Observe(app.Observer)
	// PoolReady is how many warm containers it has ready.
	PoolReady() int
	// Shutdown ends its runs and sessions at once (the server stops).
	Shutdown()
	// CloseTenant releases what it holds but the engine the tenants share.
	CloseTenant()
}

// tenants holds each tenant's MCP server, made on its first request.
type tenants struct {
	ctx      context.Context
	stopping context.Context // cancelled when the server starts to stop: open event streams end
	base     Tenant          // the server's own app: the single tenant without tokens
	cfg      *app.Config     // base's settings: each tenant's quotas
	metrics  *metrics
	log      *slog.Logger
	// newTenant makes a tenant's app (app.NewTenant over base).
	newTenant func(name string) (Tenant, error)
	tokens    atomic.Pointer[tokenSet]
	mu        sync.Mutex
	byName    map[string]*tenantServer
	closed    bool
}

// tenantServer is one tenant's pybox: its app (sandbox, environment,
// storage), MCP server and streamable HTTP handler, and call quota.
type tenantServer struct {
	app      Tenant
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
		if a, err = t.newTenant(name); err != nil {
			return nil, fmt.Errorf("tenant %s: %w", name, err)
		}
		a.Observe(t.metrics.tenant(name))
	}
	srv, stop, err := a.MCPServer(t.ctx)
	if err != nil {
		if a != t.base {
			a.CloseTenant()
		}
		return nil, fmt.Errorf("tenant %s: %w", name, err)
	}
	ts := &tenantServer{app: a, stop: stop, rate: newRateLimit(t.cfg.TenantRate), sessions: &sessionGate{srv: srv, max: t.cfg.MaxMCPSessions, ttl: t.cfg.SessionTTL}}
	srv.AddReceivingMiddleware(ts.quota(t.metrics))
	ts.handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{MaxRequestBodyBytes: maxHTTPBody, Logger: t.log.With("tenant", name), SessionTimeout: t.cfg.SessionTTL})
	t.byName[name] = ts
	t.log.Info("tenant ready", "tenant", name)
	return ts, nil
}

// pools reports each tenant's ready warm containers.
func (t *tenants) pools() map[string]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]int{}
	for name, ts := range t.byName {
		out[name] = ts.app.PoolReady()
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
		ts.app.Shutdown()
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
