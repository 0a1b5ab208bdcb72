package bench

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// httpRows measures execute_code over streamable HTTP, beside the stdio
// rows: a fresh `pybox serve --http` on loopback (one tenant, no tokens),
// warm calls 0.5 s apart, session calls, and 20 clients at once.
func (b *bench) httpRows(ctx context.Context, serveArgs []string) []Row {
	skipped := func(err error) []Row {
		return []Row{{Name: "execute_code print(1) over HTTP", Skipped: err.Error()}}
	}
	self, err := os.Executable()
	if err != nil {
		return skipped(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return skipped(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	storage, _ := os.MkdirTemp("", "pybox-bench-")
	state, _ := os.MkdirTemp("", "pybox-bench-state-")
	defer os.RemoveAll(storage)
	defer os.RemoveAll(state)
	cmd := exec.Command(self, append([]string{"serve", "--log-level=warn", "--http", addr}, serveArgs...)...)
	cmd.Env = append(os.Environ(), "CODE_STORAGE_DIR="+storage, "PYBOX_STATE_DIR="+state)
	cmd.Stderr = b.stderr
	if err := cmd.Start(); err != nil {
		return skipped(err)
	}
	defer func() { cmd.Process.Signal(os.Interrupt); cmd.Wait() }()
	url := "http://" + addr
	for deadline := time.Now().Add(60 * time.Second); ; {
		if resp, err := http.Get(url + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			return skipped(fmt.Errorf("pybox serve --http was not healthy within 60 s"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	connect := func() (*mcp.ClientSession, error) {
		client := mcp.NewClient(&mcp.Implementation{Name: "pybox-bench", Version: b.version}, nil)
		return client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url + "/mcp"}, nil)
	}
	cs, err := connect()
	if err != nil {
		return skipped(err)
	}
	defer cs.Close()
	var rows []Row
	for _, sc := range []scenario{
		{name: "execute_code print(1) over HTTP, calls 0.5 s apart", note: "the stdio row's twin", pause: 500 * time.Millisecond,
			call: func(int) error { return callExpect(ctx, cs, "execute_code", map[string]any{"code": "print(1)"}, "1\n") }},
		{name: "execute_code in a live session over HTTP", note: "the stdio row's twin",
			call: func(int) error {
				return callExpect(ctx, cs, "execute_code", map[string]any{"code": "print(1)", "session_id": "bench"}, "1\n")
			}},
	} {
		row, err := b.measure(sc)
		if err != nil {
			row = Row{Name: sc.name, Skipped: err.Error()}
		}
		row.Note = sc.note
		rows = append(rows, row)
	}
	return append(rows, b.httpClientsRow(ctx, connect))
}

// httpClientsRow: 20 clients, each with its own MCP session, call
// execute_code print(1) in a loop for 20 s (at -n 20; n seconds: the row
// follows -n as the others do).
func (b *bench) httpClientsRow(ctx context.Context, connect func() (*mcp.ClientSession, error)) Row {
	clients, span := 20, loadSpan(b.n)
	name := fmt.Sprintf("%d HTTP clients, execute_code print(1) for %v", clients, span)
	var sessions []*mcp.ClientSession
	for range clients {
		cs, err := connect()
		if err != nil {
			return Row{Name: name, Skipped: err.Error()}
		}
		defer cs.Close()
		sessions = append(sessions, cs)
	}
	end := time.Now().Add(span)
	return b.loadRow(ctx, name, sessions, func() bool { return time.Now().Before(end) })
}
