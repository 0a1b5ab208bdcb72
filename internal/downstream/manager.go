package downstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Tool is one downstream tool.
type Tool struct {
	Server      string
	Name        string
	Description string
	InputSchema map[string]any
}

// Qualified is the tool's name as code calls it: SERVER.TOOL.
func (t Tool) Qualified() string { return t.Server + "." + t.Name }

// Manager holds one MCP client session per downstream server, connected
// on first use and again after the server crashed; Close stops them.
type Manager struct {
	servers map[string]Server
	log     *slog.Logger
	version string
	mu      sync.Mutex
	conns   map[string]*conn
	closed  bool
}

// conn is one server's client session (nil until connected).
type conn struct {
	mu    sync.Mutex
	cs    *mcp.ClientSession
	tools []Tool
}

// NewManager returns a Manager for servers; nothing starts until used.
func NewManager(servers []Server, log *slog.Logger, version string) *Manager {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &Manager{servers: map[string]Server{}, log: log, version: version, conns: map[string]*conn{}}
	for _, s := range servers {
		m.servers[s.Name] = s
		m.conns[s.Name] = &conn{}
	}
	return m
}

// Servers names the configured servers, sorted.
func (m *Manager) Servers() []string { return slices.Sorted(maps.Keys(m.servers)) }

// ErrUnknownTool: the name is not SERVER.TOOL of a configured server.
var ErrUnknownTool = errors.New("unknown downstream tool")

// Tools lists every server's tools (connecting as needed). A server that
// cannot be reached is left out, and its error returned beside the rest.
func (m *Manager) Tools(ctx context.Context) ([]Tool, error) {
	var all []Tool
	var errs []error
	for _, name := range m.Servers() {
		ts, err := m.serverTools(ctx, name)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			continue
		}
		all = append(all, ts...)
	}
	return all, errors.Join(errs...)
}

func (m *Manager) serverTools(ctx context.Context, name string) ([]Tool, error) {
	c, cs, err := m.session(ctx, name)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	cached := c.tools
	c.mu.Unlock()
	if cached != nil {
		return cached, nil
	}
	var tools []Tool
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			m.drop(name, cs, err)
			return nil, err
		}
		schema, _ := t.InputSchema.(map[string]any)
		tools = append(tools, Tool{Server: name, Name: t.Name, Description: t.Description, InputSchema: schema})
	}
	c.mu.Lock()
	c.tools = tools
	c.mu.Unlock()
	return tools, nil
}

// Call calls SERVER.TOOL with args, within timeout. A server that crashed
// is started again for the call; its tool's error result is returned as
// is (IsError set).
func (m *Manager) Call(ctx context.Context, qualified string, args map[string]any, timeout time.Duration) (*mcp.CallToolResult, error) {
	server, tool, ok := strings.Cut(qualified, ".")
	if _, known := m.servers[server]; !ok || !known || tool == "" {
		return nil, fmt.Errorf("%w %q: use SERVER.TOOL with SERVER one of %s", ErrUnknownTool, qualified, strings.Join(m.Servers(), ", "))
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for attempt := 0; ; attempt++ {
		_, cs, err := m.session(ctx, server)
		if err != nil {
			return nil, err
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		if err == nil {
			return res, nil
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s: no answer within %v", qualified, timeout)
		}
		if !m.drop(server, cs, err) || attempt > 0 {
			return nil, err
		}
		m.log.Warn("a downstream MCP server's connection broke; starting it again", "server", server, "err", err)
	}
}

// session returns server's connected session, connecting first if needed.
func (m *Manager) session(ctx context.Context, name string) (*conn, *mcp.ClientSession, error) {
	m.mu.Lock()
	c, closed := m.conns[name], m.closed
	m.mu.Unlock()
	if closed {
		return nil, nil, errors.New("the server is stopping")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cs != nil {
		return c, c.cs, nil
	}
	cs, err := m.connect(ctx, m.servers[name])
	if err != nil {
		return nil, nil, err
	}
	c.cs, c.tools = cs, nil
	return c, cs, nil
}

// drop forgets a session whose transport failed (the next use starts the
// server again); it reports whether err was such a failure rather than an
// answer (a JSON-RPC error from a live server).
func (m *Manager) drop(name string, cs *mcp.ClientSession, err error) bool {
	var rpc *jsonrpc.Error
	if errors.As(err, &rpc) {
		return false
	}
	m.mu.Lock()
	c := m.conns[name]
	m.mu.Unlock()
	c.mu.Lock()
	if c.cs == cs {
		c.cs, c.tools = nil, nil
	}
	c.mu.Unlock()
	cs.Close()
	return true
}

// connect starts or dials one server. A command server's stderr goes to
// pybox's log, line by line.
func (m *Manager) connect(ctx context.Context, s Server) (*mcp.ClientSession, error) {
	client := mcp.NewClient(&mcp.Implementation{Name: "pybox", Version: m.version}, nil)
	var transport mcp.Transport
	if s.URL != "" {
		transport = &mcp.StreamableClientTransport{Endpoint: s.URL, HTTPClient: &http.Client{Transport: headers{s.Headers, http.DefaultTransport}}}
	} else {
		cmd := exec.Command(s.Command, s.Args...)
		cmd.Env = os.Environ()
		for k, v := range s.Env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		cmd.Stderr = &logLines{log: m.log, server: s.Name}
		transport = &mcp.CommandTransport{Command: cmd}
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cs, err := client.Connect(cctx, transport, nil)
	if err != nil {
		return nil, fmt.Errorf("connect to MCP server %s: %w", s.Name, err)
	}
	m.log.Info("connected to a downstream MCP server", "server", s.Name)
	return cs, nil
}

// Close stops every server.
func (m *Manager) Close() {
	m.mu.Lock()
	m.closed = true
	conns := slices.Collect(maps.Values(m.conns))
	m.mu.Unlock()
	for _, c := range conns {
		c.mu.Lock()
		if c.cs != nil {
			c.cs.Close()
			c.cs = nil
		}
		c.mu.Unlock()
	}
}

// headers adds fixed headers to every request.
type headers struct {
	h    map[string]string
	base http.RoundTripper
}

func (h headers) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(h.h) > 0 {
		r = r.Clone(r.Context())
		for k, v := range h.h {
			r.Header.Set(k, v)
		}
	}
	return h.base.RoundTrip(r)
}

// logLines writes a server's stderr to the log, a record per line, each
// cut at 1 KiB (the log bounds repeats).
type logLines struct {
	log    *slog.Logger
	server string
	mu     sync.Mutex
	buf    []byte
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := strings.IndexByte(string(l.buf), '\n')
		if i < 0 {
			if len(l.buf) > 1024 {
				l.flush(l.buf)
				l.buf = l.buf[:0]
			}
			return len(p), nil
		}
		l.flush(l.buf[:i])
		l.buf = l.buf[i+1:]
	}
}

func (l *logLines) flush(line []byte) {
	if len(line) > 1024 {
		line = line[:1024]
	}
	l.log.Info("downstream MCP server stderr", "server", l.server, "line", string(line))
}
