package downstream

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// connect starts or dials one server; its messages are read with a bound
// of m.maxMessage bytes each (see lineBound, httpBound).
func (m *Manager) connect(ctx context.Context, s Server) (*mcp.ClientSession, error) {
	client := mcp.NewClient(&mcp.Implementation{Name: "pybox", Version: m.version}, nil)
	var transport mcp.Transport
	if s.URL != "" {
		transport = &mcp.StreamableClientTransport{Endpoint: s.URL, DisableStandaloneSSE: true,
			HTTPClient: &http.Client{Transport: httpBound{headers: s.Headers, max: m.maxMessage, base: http.DefaultTransport}}}
	} else {
		transport = &commandTransport{s: s, log: m.log, max: m.maxMessage, env: m.env}
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cs, err := client.Connect(cctx, transport, nil)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	m.log.Info("connected to a downstream MCP server", "server", s.Name)
	return cs, nil
}

// commandTransport starts a command server with a minimal environment
// (serverEnv), its stderr going to the log, its messages read through a
// lineBound.
type commandTransport struct {
	s   Server
	log *slog.Logger
	max int
	env map[string]string // Options.Env
}

func (t *commandTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	cmd := exec.Command(t.s.Command, t.s.Args...)
	cmd.Env = serverEnv(t.env, t.s.Env)
	cmd.Stderr = &logLines{log: t.log, server: t.s.Name}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &process{cmd: cmd, stdin: stdin}
	tr := &mcp.IOTransport{Reader: readCloser{newLineBound(stdout, t.max), stdout}, Writer: p, MaxLineLength: t.max + 64<<10}
	return tr.Connect(ctx)
}

// readCloser is a Reader with the Close of the pipe it reads.
type readCloser struct {
	io.Reader
	io.Closer
}

// process is a command server's stdin; closing it ends the server: its
// stdin closed (and the server continued, if it was stopped), then
// SIGTERM, then SIGKILL, two seconds apart. Close is safe to call more
// than once.
type process struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	once  sync.Once
	err   error
}

func (p *process) Write(b []byte) (int, error) { return p.stdin.Write(b) }

func (p *process) Close() error {
	p.once.Do(func() {
		p.stdin.Close() // its failure: the pipe is gone already
		resume(p.cmd.Process)
		exited := make(chan error, 1)
		go func() { exited <- p.cmd.Wait() }()
		var ok bool
		if p.err, ok = waitFor(exited); ok {
			return
		}
		_ = p.cmd.Process.Signal(syscall.SIGTERM) // it may have exited meanwhile
		if p.err, ok = waitFor(exited); ok {
			return
		}
		_ = p.cmd.Process.Kill() // idem
		p.err = <-exited
	})
	return p.err
}

// waitFor waits up to two seconds for the process's exit.
func waitFor(exited chan error) (error, bool) {
	select {
	case err := <-exited:
		return err, true
	case <-time.After(2 * time.Second):
		return nil, false
	}
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
