package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pybox-dev/pybox/tools"
)

func serveCmd(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	c := &config{}
	fs := newFlags("serve", "pybox serve [flags]", stderr, c)
	if err := parse(fs, c, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return errUsage
	}
	a, err := newApp(c, stderr)
	if err != nil {
		return err
	}
	defer a.Close()
	store, err := openStorage(c.StorageDir)
	if err != nil {
		return err
	}
	defer store.Close()
	sessions, err := a.openSessions()
	if err != nil {
		return err
	}
	defer sessions.Close()
	if n, err := a.sandbox.ReapOrphans(ctx); err != nil {
		a.log.Warn("could not look for leftover containers", "err", err)
	} else if n > 0 {
		a.log.Info("removed containers left by a previous pybox", "count", n)
	}
	// The environment is made ready (image built, packages preinstalled) in
	// the background; when the client goes away that work is cancelled.
	readyCtx, stopReady := context.WithCancel(ctx)
	ready := a.newReadiness(readyCtx)
	defer ready.wg.Wait()
	defer stopReady()
	codeLimit, err := c.codeLimit()
	if err != nil {
		return err
	}
	fileLimit, err := c.fileLimit()
	if err != nil {
		return err
	}
	srv, err := tools.NewServer(tools.Config{
		Sandbox: a.sandbox, Storage: store, Sessions: sessions, Envs: a.envs, Index: a.index, Ready: ready.wait, MaxCodeBytes: codeLimit, MaxInputBytes: codeLimit, MaxFileBytes: fileLimit,
		MaxTimeout: c.MaxTimeout, MaxCalls: c.MaxCalls, Toolset: c.Toolset, Guard: c.policy.Check, Version: version, Log: a.log,
	})
	if err != nil {
		return err
	}
	a.log.Info("pybox serving MCP over stdio", "version", version, "code_storage_dir", store.Path(), "image", a.image)
	// The client going away (stdin EOF) or a signal (ctx) stops the runs in
	// flight at once: their containers go, and the server exits in seconds
	// instead of waiting for them.
	defer context.AfterFunc(ctx, a.sandbox.Shutdown)()
	err = runStdio(ctx, srv, stdin, stdout, a.log, a.sandbox.Shutdown)
	if errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// runStdio serves srv on stdin/stdout through the stdio guard; onEOF runs
// when stdin ends, before the SDK finishes the calls in flight.
func runStdio(ctx context.Context, srv *mcp.Server, stdin io.Reader, stdout io.Writer, log *slog.Logger, onEOF func()) error {
	out := &lockedWriter{w: stdout}
	pr, pw := io.Pipe()
	guard := &stdioGuard{in: stdin, out: out, pipe: pw, log: log, onEOF: onEOF}
	done := make(chan struct{})
	go func() {
		defer close(done)
		guard.run()
	}()
	err := srv.Run(ctx, &mcp.IOTransport{Reader: pr, Writer: out})
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
