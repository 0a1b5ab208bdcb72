package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pybox-dev/pybox/tools"
)

func serveCmd(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	c := &config{serving: true}
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
	a, err := newApp(ctx, c, stderr)
	if err != nil {
		return err
	}
	defer a.Close()
	srv, stop, err := a.mcpServer(ctx)
	if err != nil {
		return err
	}
	defer stop()
	a.log.Info("pybox serving MCP over stdio", "version", version, "code_storage_dir", c.StorageDir, "image", a.image)
	// The client going away (stdin EOF) or a signal (ctx) stops the runs in
	// flight at once: their containers go, and the server exits in seconds
	// instead of waiting for them.
	defer context.AfterFunc(ctx, a.sandbox.Shutdown)()
	err = runStdio(ctx, srv, stdio{in: stdin, out: stdout, stall: c.StallTimeout}, a.log, a.sandbox.Shutdown)
	if errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// mcpServer makes a's MCP server: its code storage and session folders
// opened, leftovers of an earlier pybox on its state directory removed,
// and its environment made ready in the background (until ctx ends).
// stop releases what it opened.
func (a *app) mcpServer(ctx context.Context) (*mcp.Server, func(), error) {
	c := a.cfg
	var closers []func()
	stop := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	fail := func(err error) (*mcp.Server, func(), error) { stop(); return nil, nil, err }
	store, err := a.openStorage(c.StorageDir)
	if err != nil {
		return fail(err)
	}
	closers = append(closers, func() { store.Close() })
	sessions, err := a.openSessions()
	if err != nil {
		return fail(err)
	}
	closers = append(closers, func() { sessions.Close() })
	if n, err := a.sandbox.ReapOrphans(ctx); err != nil {
		a.log.Warn("could not look for leftover containers", "err", err)
	} else if n > 0 {
		a.log.Info("removed containers left by a previous pybox", "count", n)
	}
	if !a.hostChecked {
		if err := a.checkSameHost(ctx, store.Path(), sessions.Path(), filepath.Join(c.StateDir, "runs")); err != nil {
			return fail(err)
		}
	}
	// The environment is made ready (image built, packages preinstalled) in
	// the background; when the server stops that work is cancelled.
	readyCtx, stopReady := context.WithCancel(ctx)
	ready := a.newReadiness(readyCtx)
	closers = append(closers, func() { stopReady(); ready.wg.Wait() })
	codeLimit, err := c.codeLimit()
	if err != nil {
		return fail(err)
	}
	fileLimit, err := c.fileLimit()
	if err != nil {
		return fail(err)
	}
	var modes tools.CodeMode
	cm, err := newCodeMode(c, a.log)
	if err != nil {
		return fail(err)
	}
	if cm != nil {
		closers = append(closers, cm.Close)
		modes = cm
	}
	srv, err := tools.NewServer(tools.Config{
		Sandbox: a.sandbox, Storage: store, Sessions: sessions, Scratch: a.backend != nil, Envs: a.observedEnvs(), Index: a.index, Ready: ready.wait, Notice: a.takeNotice, MaxCodeBytes: codeLimit, MaxInputBytes: codeLimit, MaxFileBytes: fileLimit,
		MaxTimeout: c.MaxTimeout, MaxCalls: c.MaxCalls, Toolset: c.Toolset, Guard: c.policy.Check, GuardRules: c.policy.GuardRules(), CodeMode: modes, Version: version, Log: a.log, Observe: a.observeRun,
	})
	if err != nil {
		return fail(err)
	}
	return srv, stop, nil
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
