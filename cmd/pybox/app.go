package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/singleflight"

	"github.com/pybox-dev/pybox/images"
	"github.com/pybox-dev/pybox/internal/engine"
	"github.com/pybox-dev/pybox/internal/storage"
	"github.com/pybox-dev/pybox/sandbox"
)

// app is the wired runtime shared by serve, run and bench.
type app struct {
	cfg     *config
	log     *slog.Logger
	engine  *engine.Client
	sandbox *sandbox.Sandbox
	image   string
}

// newApp validates the configuration and connects the parts.
func newApp(c *config, stderr io.Writer) (*app, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	log, err := c.logger(stderr)
	if err != nil {
		return nil, err
	}
	limits, err := c.limits()
	if err != nil {
		return nil, err
	}
	image, err := c.image()
	if err != nil {
		return nil, err
	}
	eng, err := engine.New(log)
	if err != nil {
		return nil, err
	}
	sb, err := sandbox.New(sandbox.Config{Engine: eng, Image: image, Runtime: c.Runtime, Limits: limits,
		MaxConcurrent: c.MaxConcurrent, QueueWait: c.QueueWait, Log: log})
	if err != nil {
		eng.Close()
		return nil, err
	}
	return &app{cfg: c, log: log, engine: eng, sandbox: sb, image: image}, nil
}

func (a *app) Close() error { return a.engine.Close() }

// openStorage opens a code-storage directory the sandbox user can write to.
func openStorage(path string) (*storage.Dir, error) {
	dir, err := storage.Open(path)
	if err != nil {
		return nil, err
	}
	if os.Geteuid() == 0 {
		// Programs run as the image's unprivileged user, so they need the
		// directory to be theirs to create files (outputs) in it.
		var uid, gid int
		if _, err := fmt.Sscanf(images.SandboxUser, "%d:%d", &uid, &gid); err != nil {
			dir.Close()
			return nil, fmt.Errorf("sandbox user %q: %w", images.SandboxUser, err)
		}
		if err := os.Chown(dir.Path(), uid, gid); err != nil {
			dir.Close()
			return nil, fmt.Errorf("give the code storage to the sandbox user: %w", err)
		}
	}
	return dir, nil
}

// ensureImage makes sure the runtime image exists, building it as the
// build setting says. Progress goes to progress.
func (a *app) ensureImage(ctx context.Context, progress io.Writer) error {
	_, found, err := a.engine.InspectImage(ctx, a.image)
	switch {
	case err != nil:
		return err
	case a.cfg.Image != "" && !found:
		return fmt.Errorf("image %s does not exist", a.image)
	case a.cfg.Image != "":
		return nil // a user-chosen image is used as it is
	case a.cfg.Build == "never" && !found:
		return fmt.Errorf("runtime image %s is missing and building is off (PYBOX_BUILD=never): run `pybox image build`", a.image)
	case a.cfg.Build == "never":
		return nil
	}
	b := &images.Builder{Engine: a.engine, Log: a.log, Progress: progress, Mirror: a.cfg.Mirror}
	variant, _ := images.ParseVariant(a.cfg.Variant) // validated in newApp
	if a.cfg.Build == "auto" {
		_, err = b.Ensure(ctx, variant)
		return err
	}
	if found {
		return nil
	}
	_, err = b.Build(ctx, images.BuildOptions{Variant: variant, Offline: a.cfg.Build == "offline"})
	return err
}

// readiness builds the runtime image at most once at a time, in the
// background on the server's context, and lets each call wait for it.
// A failed attempt (say, Docker was down) is retried by the next call.
type readiness struct {
	app      *app
	ctx      context.Context // the server's: a cancelled call must not stop a build
	progress io.Writer
	flight   singleflight.Group
	ok       atomic.Bool
	wg       sync.WaitGroup
}

func (a *app) newReadiness(ctx context.Context, progress io.Writer) *readiness {
	r := &readiness{app: a, ctx: ctx, progress: progress}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		_ = r.wait(ctx) // an error is logged and retried on the first call
	}()
	return r
}

// wait blocks until the image is ready or ctx ends.
func (r *readiness) wait(ctx context.Context) error {
	if r.ok.Load() {
		return nil
	}
	ch := r.flight.DoChan("ensure", func() (any, error) {
		err := r.app.ensureImage(r.ctx, r.progress)
		if err != nil {
			r.app.log.Error("runtime image not ready", "image", r.app.image, "err", err)
		}
		r.ok.Store(err == nil)
		return nil, err
	})
	select {
	case res := <-ch:
		if res.Err != nil && !errors.Is(res.Err, engine.ErrUnreachable) {
			return fmt.Errorf("the runtime image is not available: %w", res.Err)
		}
		return res.Err
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
