package main

import (
	"context"
	"errors"
	"io"

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
		Sandbox: a.sandbox, Storage: store, Envs: a.envs, Index: a.index, Ready: ready.wait, MaxCodeBytes: codeLimit, MaxInputBytes: codeLimit, MaxFileBytes: fileLimit,
		MaxTimeout: c.MaxTimeout, Toolset: c.Toolset, Guard: c.policy.Check, Version: version, Log: a.log,
	})
	if err != nil {
		return err
	}
	a.log.Info("pybox serving MCP over stdio", "version", version, "code_storage_dir", store.Path(), "image", a.image)
	err = srv.Run(ctx, &mcp.IOTransport{Reader: nopCloser{stdin}, Writer: nopWriteCloser{stdout}})
	if errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

type nopCloser struct{ io.Reader }

func (nopCloser) Close() error { return nil }

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
