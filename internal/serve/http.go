package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/pybox-dev/pybox/internal/app"
)

// maxHTTPBody bounds one request body: a tool call's arguments (code,
// files) travel in it.
const maxHTTPBody = 16 << 20

// HTTP serves MCP over streamable HTTP on c.HTTPAddr until ctx ends,
// then drains the calls in flight for up to c.ShutdownGrace and removes
// every container. With a tokens file every request needs a bearer token,
// and each token's tenant has its own code storage, sessions, environment,
// warm pool and quotas; without one there is a single tenant, and only a
// loopback address is allowed unless --insecure-no-auth.
func HTTP(ctx context.Context, c *app.Config, stderr io.Writer) error {
	if c.TenantRate < 0 {
		return errors.New("tenant calls per minute must be 0 (no limit) or more")
	}
	if err := checkConnSettings(c); err != nil {
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
	base, err := app.New(ctx, c, stderr)
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
	t := &tenants{ctx: ctx, stopping: stopping, base: base, cfg: c, byName: map[string]*tenantServer{}, log: base.Log,
		newTenant: func(name string) (Tenant, error) {
			a, err := app.NewTenant(base, name)
			if err != nil {
				return nil, err
			}
			return a, nil
		}}
	t.tokens.Store(toks)
	t.metrics = newMetrics(t.pools)
	base.Observe(t.metrics.tenant(""))
	defer t.close()

	ln, err := listen(c, c.HTTPAddr, base.Log)
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
	srv := httpServer(c, accessLog(mux, access, base.Log, t.metrics))
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	var metricsSrv *http.Server
	if c.MetricsAddr != "" {
		mln, err := listen(c, c.MetricsAddr, base.Log)
		if err != nil {
			srv.Close()
			return fmt.Errorf("listen on --metrics-addr %s: %w", c.MetricsAddr, err)
		}
		metricsSrv = httpServer(c, promhttp.HandlerFor(t.metrics.reg, promhttp.HandlerOpts{}))
		go metricsSrv.Serve(mln)
		defer metricsSrv.Close()
	}
	base.Log.Info("pybox serving MCP over streamable HTTP", "version", c.Version, "url", "http://"+ln.Addr().String()+"/mcp",
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

// healthz answers 200 when a can run programs (app.App.Health), else
// 503, with a JSON body saying which part failed.
func healthz(a interface {
	Health(context.Context) (map[string]string, bool)
}) http.HandlerFunc {
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
