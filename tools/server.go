package tools

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pybox-dev/pybox/images"
	"github.com/pybox-dev/pybox/internal/storage"
	"github.com/pybox-dev/pybox/sandbox"
)

// Config wires the tools to their dependencies. The zero value of each
// optional field means its default.
type Config struct {
	Sandbox *sandbox.Sandbox // required
	Storage *storage.Dir     // required: the code-storage directory
	// Sessions holds each session's workspace (<id>/); it must be outside
	// Storage, where no container but the session's own can reach it.
	// nil: session calls fail with a clear error.
	Sessions *storage.Dir
	// Scratch: stateless runs get no host folder (a backend without host
	// folders: Kubernetes). The program travels with its request and its
	// /workspace is the container's own; the file tools still manage code
	// storage, and execute_code_file sends the stored file's text.
	Scratch bool
	Envs    Environments // required: the active environment and installs
	Index   images.Index // package index settings, for reporting
	// Ready, when set, blocks until the runtime is usable (the image built
	// on first use) or returns why it is not.
	Ready func(ctx context.Context) error
	// Notice, when set, returns a message for the model, once (say, that
	// PREINSTALLED_PACKAGES failed); it is added to the next tool result.
	Notice        func() string
	MaxCodeBytes  int           // largest program accepted; default 1 MiB
	MaxInputBytes int           // largest stdin text accepted; default 1 MiB
	MaxTimeout    time.Duration // cap on a call's timeout_s; default 300s
	MaxFileBytes  int           // largest code file the file tools build or read; default 8 MiB
	// MaxCalls bounds the tool calls in flight (running or waiting for a
	// slot), and MaxCallBytes the bytes of their arguments: past either, a
	// call is refused at once, before anything of it is decoded or saved.
	MaxCalls     int    // default 32
	MaxCallBytes int    // default 16 MiB
	Toolset      string // which tools are listed (see Toolsets); default "default"
	// Guard, when set, checks code before it runs (the policy's static
	// guardrails); its error is shown to the model as is.
	Guard func(code string) error
	// GuardRules, when set, are the policy's static guardrails
	// (policies.Guard), checked on a real parse inside the sandbox before
	// each program runs; a violation is a POLICY_VIOLATION tool error.
	GuardRules any
	// CodeMode, when set, lets programs call downstream MCP tools and adds
	// the list_mcp_tools tool.
	CodeMode CodeMode
	// Observe, when set, sees how every run ended (for metrics): path is
	// warm, cold or session; err is an infrastructure failure.
	Observe func(path string, res sandbox.Result, err error)
	Version string       // reported to clients
	Log     *slog.Logger // nil discards
}

// Defaults for Config.
const (
	DefaultMaxCodeBytes  = 1 << 20
	DefaultMaxInputBytes = 1 << 20
	DefaultMaxTimeout    = 300 * time.Second
	DefaultMaxFileBytes  = 8 << 20
	DefaultMaxCalls      = 32
	DefaultMaxCallBytes  = 16 << 20
)

type handlers struct{ cfg Config }

// NewServer builds the MCP server with every tool registered.
func NewServer(cfg Config) (*mcp.Server, error) {
	if cfg.Sandbox == nil || cfg.Storage == nil || cfg.Envs == nil {
		return nil, errors.New("tools: a sandbox, a code storage and an environment manager are required")
	}
	cfg.MaxCodeBytes = orDefault(cfg.MaxCodeBytes, DefaultMaxCodeBytes)
	cfg.MaxInputBytes = orDefault(cfg.MaxInputBytes, DefaultMaxInputBytes)
	cfg.MaxTimeout = orDefault(cfg.MaxTimeout, DefaultMaxTimeout)
	cfg.MaxFileBytes = orDefault(cfg.MaxFileBytes, DefaultMaxFileBytes)
	cfg.MaxCalls = orDefault(cfg.MaxCalls, DefaultMaxCalls)
	cfg.MaxCallBytes = max(orDefault(cfg.MaxCallBytes, DefaultMaxCallBytes), 2*cfg.MaxCodeBytes+64<<10)
	cfg.Version = orDefault(cfg.Version, "dev")
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Ready == nil {
		cfg.Ready = func(context.Context) error { return nil }
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "pybox", Title: "pybox: Python in a locked-down sandbox", Version: cfg.Version},
		&mcp.ServerOptions{Instructions: instructions})
	h := &handlers{cfg: cfg}
	s.AddReceivingMiddleware((&admission{maxCalls: cfg.MaxCalls, maxBytes: cfg.MaxCallBytes, log: cfg.Log}).middleware)
	if cfg.Notice != nil {
		s.AddReceivingMiddleware(noticeMiddleware(cfg.Notice))
	}
	if err := h.register(s, orDefault(cfg.Toolset, ToolsetDefault)); err != nil {
		return nil, err
	}
	if cfg.CodeMode != nil {
		addTool(s, listMCPToolsTool, h.listMCPTools)
	}
	return s, nil
}

const instructions = `pybox runs Python 3 in a fresh, locked-down container for every call: no network, ` +
	`a non-root user, a read-only system, limited memory, CPU, processes and time. ` +
	`Files persist in the code-storage directory, mounted as the working directory /workspace.`

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// noticeMiddleware adds the pending notice, if any, to a tool result.
func noticeMiddleware(take func() string) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			if r, ok := res.(*mcp.CallToolResult); ok && err == nil {
				if n := take(); n != "" {
					r.Content = append(r.Content, &mcp.TextContent{Text: "Note from pybox: " + n})
				}
			}
			return res, err
		}
	}
}
