package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/docker/go-units"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pybox-dev/pybox/internal/downstream"
	"github.com/pybox-dev/pybox/sandbox"
)

// codeMode lets sandboxed programs call the tools of downstream MCP
// servers (tools.CodeMode): each call goes over the runner's channel to
// pybox, is checked against the policy's allowlist, bounded (calls per
// run, time per call, result bytes), counted and logged.
type codeMode struct {
	mgr       *downstream.Manager
	allow     []string // policy patterns (path.Match) of SERVER.TOOL; nil = all
	maxCalls  int
	timeout   time.Duration
	maxResult int
	log       *slog.Logger
}

// newCodeMode loads the servers file: PYBOX_MCP_SERVERS, or
// mcp_servers.json in the state directory when that exists. nil: none.
func newCodeMode(c *Config, log *slog.Logger) (*codeMode, error) {
	file := c.MCPServers
	if file == "" {
		file = filepath.Join(c.StateDir, "mcp_servers.json")
		if _, err := os.Stat(file); err != nil {
			return nil, nil
		}
	}
	servers, err := downstream.Load(file)
	if err != nil {
		return nil, err
	}
	maxResult, err := units.RAMInBytes(c.MCPMaxResult)
	if err != nil || maxResult < 1 {
		return nil, fmt.Errorf("MCP max result %q: must be a size such as 256k", c.MCPMaxResult)
	}
	if c.MCPMaxCalls < 1 || c.MCPCallTimeout < 100*time.Millisecond {
		return nil, errors.New("MCP max calls must be at least 1 and the MCP call timeout at least 100ms")
	}
	var allow []string
	if c.LoadedPolicy != nil {
		allow = c.LoadedPolicy.MCPTools
	}
	log.Info("code mode: downstream MCP servers configured", "file", file, "servers", len(servers))
	// A downstream's message is read up to four times the result limit
	// (a result's text and structured forms, escaped) plus 1 MiB; a
	// longer answer is refused while it is read.
	mgr := downstream.NewManager(servers, downstream.Options{Log: log, Version: c.Version, MaxMessage: 4*int(maxResult) + 1<<20, Env: c.ParentDirs()})
	return &codeMode{mgr: mgr, allow: allow, maxCalls: c.MCPMaxCalls,
		timeout: c.MCPCallTimeout, maxResult: int(maxResult), log: log}, nil
}

func (cm *codeMode) Close() { cm.mgr.Close() }

// allowed reports whether the policy lets code call name.
func (cm *codeMode) allowed(name string) bool {
	if cm.allow == nil {
		return true
	}
	for _, p := range cm.allow {
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}

// Stubs lists the tools code may call, as Python stubs.
func (cm *codeMode) Stubs(ctx context.Context) (string, []string, error) {
	tools, names, err := cm.tools(ctx)
	return downstream.Stubs(tools), names, err
}

// tools are the downstream tools the policy lets code call, and their names.
func (cm *codeMode) tools(ctx context.Context) ([]downstream.Tool, []string, error) {
	all, err := cm.mgr.Tools(ctx)
	var tools []downstream.Tool
	var names []string
	for _, t := range all {
		if cm.allowed(t.Qualified()) {
			tools = append(tools, t)
			names = append(names, t.Qualified())
		}
	}
	return tools, names, err
}

// ForRun is one run's calls, and how many it made.
func (cm *codeMode) ForRun() (sandbox.ToolCalls, func() int) {
	rc := &runCalls{cm: cm}
	return rc, func() int { return int(rc.n.Load()) }
}

// runCalls are one run's tool calls.
type runCalls struct {
	cm *codeMode
	n  atomic.Int64
}

// Names lists the tools the run may call (the servers are asked lazily:
// a name that is not there fails at the call).
func (rc *runCalls) Names() []string {
	ctx, cancel := context.WithTimeout(context.Background(), rc.cm.timeout)
	defer cancel()
	_, names, _ := rc.cm.tools(ctx) // no stubs rendered on a run's path
	return names
}

// Limit is PYBOX_MCP_MAX_CALLS.
func (rc *runCalls) Limit() int { return rc.cm.maxCalls }

func (rc *runCalls) Call(ctx context.Context, name string, args json.RawMessage) (any, error) {
	cm := rc.cm
	if n := rc.n.Add(1); n > int64(cm.maxCalls) {
		return nil, fmt.Errorf("this run has made its %d tool calls (PYBOX_MCP_MAX_CALLS); the call was not made", cm.maxCalls)
	}
	if !cm.allowed(name) {
		cm.log.Warn("code mode: a tool call refused by the policy", "tool", name)
		return nil, fmt.Errorf("the policy does not allow calling %s", name)
	}
	var params map[string]any
	if len(args) > 0 && string(args) != "null" {
		if err := json.Unmarshal(args, &params); err != nil {
			return nil, fmt.Errorf("the arguments of %s are not a JSON object: %v", name, err)
		}
	}
	start := time.Now()
	res, err := cm.mgr.Call(ctx, name, params, cm.timeout)
	cm.log.Info("code mode: tool call", "tool", name, "ms", time.Since(start).Milliseconds(), "error", errText(err, res))
	if err != nil {
		return nil, err
	}
	value, err := resultValue(name, res)
	if err != nil {
		return nil, err
	}
	if b, _ := json.Marshal(value); len(b) > cm.maxResult {
		return nil, fmt.Errorf("the result of %s is %d bytes, over the limit of %d (PYBOX_MCP_MAX_RESULT)", name, len(b), cm.maxResult)
	}
	return value, nil
}

// resultValue is a tool result as the program gets it: its structured
// content when it has some, else its text; a tool error is an error with
// the tool's message.
func resultValue(name string, res *mcp.CallToolResult) (any, error) {
	var texts []string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			texts = append(texts, t.Text)
		}
	}
	text := strings.Join(texts, "\n")
	if res.IsError {
		return nil, fmt.Errorf("%s failed: %s", name, text)
	}
	if res.StructuredContent != nil {
		return res.StructuredContent, nil
	}
	return text, nil
}

func errText(err error, res *mcp.CallToolResult) string {
	switch {
	case err != nil:
		return err.Error()
	case res != nil && res.IsError:
		return "the tool reported an error"
	}
	return ""
}
