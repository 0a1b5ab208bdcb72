package serve

import (
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxInitializeBody bounds the body of a request that opens an MCP
// session (an initialize): its parameters are kept for the session's
// life, so they get far less than a tool call's arguments (maxHTTPBody).
const maxInitializeBody = 64 << 10

// sessionGate bounds the MCP sessions one tenant keeps open: the ones its
// server holds and the ones being opened. It is checked before a request
// that would open one is read.
type sessionGate struct {
	srv     *mcp.Server
	max     int
	ttl     time.Duration // an idle session ends after it (--session-ttl)
	mu      sync.Mutex
	opening int
}

// admit makes room for one more session, or says there is none; release
// is called when the request that opens it ends (by then the session is
// among srv's, or was not made).
func (g *sessionGate) admit() (release func(), open int, ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for range g.srv.Sessions() {
		open++
	}
	if open+g.opening >= g.max {
		return nil, open, false
	}
	g.opening++
	return func() {
		g.mu.Lock()
		g.opening--
		g.mu.Unlock()
	}, open, true
}

// openingSession reports whether r would open a new MCP session.
func openingSession(r *http.Request) bool {
	return r.Method == http.MethodPost && r.Header.Get("Mcp-Session-Id") == ""
}

// refuseSession answers a request for a session past the tenant's cap.
func (ts *tenantServer) refuseSession(w http.ResponseWriter, open int, m *metrics) {
	m.refused.WithLabelValues(ts.app.Tenant(), "mcp_sessions").Inc()
	w.Header().Set("Retry-After", "60")
	http.Error(w, fmt.Sprintf("too many MCP sessions: this tenant has %d open (or opening), its limit (--max-mcp-sessions); "+
		"close one (DELETE /mcp with its Mcp-Session-Id) or wait until an idle one ends (--session-ttl %s)",
		open, ts.sessions.ttl), http.StatusTooManyRequests)
}
