package downstream

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Error is a downstream failure as the caller (and so sandboxed code, and
// the model) sees it: the server's name and what failed, never its URL,
// headers, command or environment. The whole failure is in pybox's log,
// under Ref.
type Error struct {
	Server  string
	Failure string
	Ref     string // "" when there is nothing more in the log
}

func (e *Error) Error() string {
	if e.Ref == "" {
		return fmt.Sprintf("MCP server %s: %s", e.Server, e.Failure)
	}
	return fmt.Sprintf("MCP server %s: %s (pybox log ref %s)", e.Server, e.Failure, e.Ref)
}

// public turns a failure of server into the Error the caller sees,
// logging the whole of it (its URL redacted) under a reference. It is the
// one place downstream failures leave this package.
func (m *Manager) public(server string, err error) error {
	var pe *Error
	if err == nil || errors.As(err, &pe) {
		return err
	}
	failure, known := describe(err)
	if known {
		return &Error{Server: server, Failure: failure}
	}
	ref := newRef()
	m.log.Warn("a downstream MCP server failed", "server", server, "ref", ref, "err", m.redact(server, err.Error()))
	return &Error{Server: server, Failure: failure, Ref: ref}
}

// describe says what failed in words that carry nothing of the server's
// configuration; known is true when that is all there is to say.
func describe(err error) (failure string, known bool) {
	var rpc *jsonrpc.Error
	var dns *net.DNSError
	var nerr net.Error
	var exe *exec.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "no answer in time", false
	case errors.Is(err, syscall.ECONNREFUSED):
		return "it could not be reached (connection refused)", false
	case errors.As(err, &dns):
		return "it could not be reached (its host name did not resolve)", false
	case errors.As(err, &nerr) && nerr.Timeout():
		return "it could not be reached (timed out)", false
	case errors.As(err, &exe), errors.Is(err, os.ErrNotExist), errors.Is(err, os.ErrPermission):
		return "its command could not be started", false
	case errors.Is(err, mcp.ErrConnectionClosed):
		return "its connection closed (the server may have exited)", false
	case errors.As(err, &rpc) && localCode(rpc.Code): // the SDK's own, not the server's
	case errors.As(err, &rpc) && rpc.Code == codeTooLarge:
		return rpc.Message, true
	case errors.As(err, &rpc):
		return "it answered with an error: " + clip(rpc.Message, 500), true
	}
	return "the connection to it failed", false
}

// localCode: the JSON-RPC code is of the SDK's own failures (client
// closing, server closing, rejected by the transport).
func localCode(c int64) bool { return c == -32003 || c == -32004 || c == -32005 }

// redact removes server's URL (all but its scheme and host) from a log
// line: keys often travel in a hosted server's path or query.
func (m *Manager) redact(server, line string) string {
	raw := m.servers[server].URL
	u, err := url.Parse(raw)
	if raw == "" || err != nil {
		return line
	}
	line = strings.ReplaceAll(line, raw, u.Scheme+"://"+u.Host+"/...")
	if u.RawQuery != "" {
		line = strings.ReplaceAll(line, u.RawQuery, "...")
	}
	return line
}

// clip cuts s to n bytes.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// newRef is a short random reference tying an error to its log record.
func newRef() string {
	b := make([]byte, 4)
	rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}
