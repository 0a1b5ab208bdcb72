package downstream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
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

// Options configure a Manager; the zero value of each field means its
// default.
type Options struct {
	Log     *slog.Logger // nil: discard
	Version string       // pybox's version, told to the servers
	// MaxMessage bounds one message read from a server, in bytes (default
	// DefaultMaxMessage): a longer answer to a call is refused, for that
	// call only, while it is read.
	MaxMessage int
	// Env is set for every command server, besides the few variables it
	// inherits and its own env (see serverEnv).
	Env map[string]string
	// PingTimeout is how long a server whose call timed out has to answer
	// a ping before it is stopped (and started again at the next call);
	// default DefaultPingTimeout.
	PingTimeout time.Duration
}

// DefaultMaxMessage is Options.MaxMessage's default.
const DefaultMaxMessage = 2 << 20

// maxTools bounds one server's tool list.
const maxTools = 1000

// DefaultPingTimeout is Options.PingTimeout's default.
const DefaultPingTimeout = 5 * time.Second

// Manager holds one MCP client session per downstream server, connected
// on first use and again after the server ended or stopped answering;
// Close stops them. Safe for concurrent use.
type Manager struct {
	servers    map[string]Server
	conns      map[string]*conn // one per server, fixed at NewManager
	log        *slog.Logger
	version    string
	maxMessage int
	ping       time.Duration // Options.PingTimeout
	env        map[string]string

	ctx  context.Context // ended by Close
	stop context.CancelFunc
	wg   sync.WaitGroup // session watchers and health checks

	mu     sync.Mutex // guards closed, and wg's Go against Close's Wait
	closed bool
}

// conn is one server's client session (nil until connected).
type conn struct {
	mu       sync.Mutex
	cs       *mcp.ClientSession
	tools    []Tool
	checking atomic.Bool // a health check is under way
}

// NewManager returns a Manager for servers; nothing starts until used.
func NewManager(servers []Server, opts Options) *Manager {
	m := &Manager{servers: map[string]Server{}, conns: map[string]*conn{}, log: opts.Log, version: opts.Version, maxMessage: opts.MaxMessage, env: opts.Env, ping: opts.PingTimeout}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	if m.maxMessage <= 0 {
		m.maxMessage = DefaultMaxMessage
	}
	if m.ping <= 0 {
		m.ping = DefaultPingTimeout
	}
	m.ctx, m.stop = context.WithCancel(context.Background())
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

// errStopping: Close was called.
var errStopping = errors.New("pybox is stopping")

// Tools lists every server's tools (connecting as needed). A server that
// cannot be reached is left out, and its error (an *Error) returned
// beside the rest.
func (m *Manager) Tools(ctx context.Context) ([]Tool, error) {
	var all []Tool
	var errs []error
	for _, name := range m.Servers() {
		ts, err := m.serverTools(ctx, name)
		if err != nil {
			errs = append(errs, m.public(name, err))
			continue
		}
		all = append(all, ts...)
	}
	return all, errors.Join(errs...)
}

func (m *Manager) serverTools(ctx context.Context, name string) ([]Tool, error) {
	c := m.conns[name]
	cs, err := m.session(ctx, name)
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
			m.failed(name, cs, err)
			return nil, err
		}
		if len(tools) == maxTools {
			return nil, fmt.Errorf("it lists more than %d tools", maxTools)
		}
		schema, _ := t.InputSchema.(map[string]any)
		tools = append(tools, Tool{Server: name, Name: t.Name, Description: t.Description, InputSchema: schema})
	}
	c.mu.Lock()
	if c.cs == cs {
		c.tools = tools
	}
	c.mu.Unlock()
	return tools, nil
}

// Call calls SERVER.TOOL with args, within timeout, sending it once: a
// call whose connection broke may have run (its answer lost), so it is
// never sent again; the server is started again for the next call. A
// server that does not answer a ping after a call timed out is stopped
// (and started again for the next call). The tool's error result is
// returned as is (IsError set); every other failure is an *Error.
func (m *Manager) Call(ctx context.Context, qualified string, args map[string]any, timeout time.Duration) (*mcp.CallToolResult, error) {
	server, tool, ok := strings.Cut(qualified, ".")
	if _, known := m.servers[server]; !ok || !known || tool == "" {
		return nil, fmt.Errorf("%w %q: use SERVER.TOOL with SERVER one of %s", ErrUnknownTool, qualified, strings.Join(m.Servers(), ", "))
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cs, err := m.session(ctx, server)
	if err != nil {
		return nil, m.public(server, err)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	switch {
	case err == nil:
		return res, nil
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		m.check(server, cs)
		return nil, &Error{Server: server, Failure: fmt.Sprintf("no answer from %s within %v", tool, timeout)}
	case ctx.Err() != nil:
		return nil, &Error{Server: server, Failure: "the call was cancelled (its program ended)"}
	}
	m.failed(server, cs, err)
	return nil, m.public(server, err)
}

// session returns server's connected session, connecting first if needed.
func (m *Manager) session(ctx context.Context, name string) (*mcp.ClientSession, error) {
	c := m.conns[name]
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cs != nil {
		return c.cs, nil
	}
	if m.ctx.Err() != nil {
		return nil, errStopping
	}
	cs, err := m.connect(ctx, m.servers[name])
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		cs.Close()
		return nil, errStopping
	}
	c.cs, c.tools = cs, nil
	// A server that exits between calls is noticed at once: the next
	// call starts it again instead of failing on the dead connection.
	m.wg.Go(func() {
		_ = cs.Wait() // how it ended is in the log of the call that saw it
		m.forget(name, cs)
	})
	return cs, nil
}

// failed forgets cs after err, unless err is the server's answer (a
// JSON-RPC error from a live server, or a refused oversized answer).
func (m *Manager) failed(name string, cs *mcp.ClientSession, err error) {
	var rpc *jsonrpc.Error
	if !errors.As(err, &rpc) {
		m.forget(name, cs)
	}
}

// forget stops cs and drops it, if it is still name's session: the next
// use starts the server again.
func (m *Manager) forget(name string, cs *mcp.ClientSession) {
	c := m.conns[name]
	c.mu.Lock()
	if c.cs == cs {
		c.cs, c.tools = nil, nil
	}
	c.mu.Unlock()
	_ = cs.Close() // its error: how the process ended, nothing to act on
}

// check pings name after a call of it timed out; a server that does not
// answer within its ping timeout has stopped answering: it is forgotten (its
// process stopped), and the next call starts it again. One check at a
// time per server.
func (m *Manager) check(name string, cs *mcp.ClientSession) {
	c := m.conns[name]
	if !c.checking.CompareAndSwap(false, true) {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		c.checking.Store(false)
		return
	}
	m.wg.Go(func() {
		defer c.checking.Store(false)
		ctx, cancel := context.WithTimeout(m.ctx, m.ping)
		defer cancel()
		if err := cs.Ping(ctx, nil); err != nil && m.ctx.Err() == nil {
			m.log.Warn("a downstream MCP server stopped answering; stopping it (the next call starts it again)", "server", name, "err", m.redact(name, err.Error()))
			m.forget(name, cs)
		}
	})
}

// Close stops every server and waits for the manager's goroutines.
func (m *Manager) Close() {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	m.stop()
	for _, c := range m.conns {
		c.mu.Lock()
		cs := c.cs
		c.cs, c.tools = nil, nil
		c.mu.Unlock()
		if cs != nil {
			_ = cs.Close() // idem
		}
	}
	m.wg.Wait()
}
