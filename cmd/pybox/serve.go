package main

import (
	"context"
	"errors"
	"io"

	"github.com/pybox-dev/pybox/internal/app"
	"github.com/pybox-dev/pybox/internal/serve"
)

func serveCmd(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	c := commandConfig("serve")
	fs := newFlags("serve", "pybox serve [flags]", stderr, c)
	if err := parse(fs, c, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return errUsage
	}
	if c.HTTPAddr != "" {
		return serve.HTTP(ctx, &c.Config, stderr)
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
	err = serve.Stdio(ctx, srv, stdin, stdout, c.StallTimeout, a.Log, a.Sandbox.Shutdown)
	if errors.Is(err, context.Canceled) || errors.Is(err, io.EOF) {
		return nil
	}
	return err
}
