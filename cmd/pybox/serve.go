package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pybox-dev/pybox/internal/app"
)

func serveCmd(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	c := &config{Config: app.Config{Serving: true}}
	fs := newFlags("serve", "pybox serve [flags]", stderr, c)
	if err := parse(fs, c, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return errUsage
	}
	if c.HTTPAddr != "" {
		return serveHTTP(ctx, c, stderr)
	}
	a, err := app.New(ctx, &c.Config, stderr)
	if err != nil {
		return err
	}
	defer a.Close()
	srv, stop, err := a.MCPServer(ctx)
	if err != nil {
		return err
	}
	defer stop()
	a.Log.Info("pybox serving MCP over stdio", "version", version, "code_storage_dir", c.StorageDir, "image", a.Image)
	// The client going away (stdin EOF) or a signal (ctx) stops the runs in
	// flight at once: their containers go, and the server exits in seconds
	// instead of waiting for them.
	defer context.AfterFunc(ctx, a.Sandbox.Shutdown)()
	err = runStdio(ctx, srv, stdio{in: stdin, out: stdout, stall: c.StallTimeout}, a.Log, a.Sandbox.Shutdown)
	if errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// stdio is the server's end of the stdio transport.
type stdio struct {
	in    io.Reader
	out   io.Writer
	stall time.Duration // a write to out blocked this long means the client is gone
}

// runStdio serves srv on the stdio pair through the stdio guard. The
// client going away, by ending stdin or by no longer reading stdout for
// the stall limit, calls gone at once, before the SDK finishes the calls
// in flight; a stalled client makes runStdio return errStalled without
// waiting for the writes that will never end.
func runStdio(ctx context.Context, srv *mcp.Server, io_ stdio, log *slog.Logger, gone func()) error {
	stdin := io_.in
	out := &lockedWriter{w: io_.out}
	pr, pw := io.Pipe()
	guard := &stdioGuard{in: stdin, out: out, pipe: pw, log: log, onEOF: gone}
	done := make(chan struct{})
	go func() {
		defer close(done)
		guard.run()
	}()
	quit := make(chan struct{})
	defer close(quit)
	served := make(chan error, 1)
	go func() { served <- srv.Run(ctx, &mcp.IOTransport{Reader: pr, Writer: out}) }()
	var err error
	select {
	case err = <-served:
	case <-watchStall(out, io_.stall, quit):
		log.Error("the client stopped reading the server's output: stopping every run, removing the containers and exiting", "blocked_for", io_.stall)
		gone()
		return fmt.Errorf("%w for %v", errStalled, io_.stall)
	}
	pr.Close() // unblocks the guard if it is writing
	if c, ok := stdin.(io.Closer); ok {
		c.Close() // unblocks it if it is reading (a pipe; a terminal may not wake)
	}
	select {
	case <-done:
	case <-time.After(2 * time.Second): // a terminal read that never wakes dies with the process
	}
	return err
}
