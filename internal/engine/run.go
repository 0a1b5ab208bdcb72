package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"syscall"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"
)

// Spec describes one container run from creation to removal.
type Spec struct {
	Name   string
	Config *container.Config
	Host   *container.HostConfig
	// Stdin, when non-nil, is attached and copied to the program, then closed.
	// When nil the program's stdin is /dev/null, so input() fails at once.
	// Run waits for the copy to end, so a Read must not block for long
	// (a strings.Reader or bytes.Reader).
	Stdin io.Reader
	// Stdout and Stderr receive the program's streams (nil discards). They
	// should be capped writers: Run copies whatever the program writes.
	Stdout, Stderr io.Writer
	// Timeout is the wall-clock limit after start; zero means none.
	Timeout time.Duration
	// OnExit, when set, runs after the program exited and before removal,
	// with the exit status (used to commit an install container).
	OnExit func(ctx context.Context, id string, exit Exit) error
}

// Exit is how a run ended.
type Exit struct {
	Code      int
	TimedOut  bool // killed at the deadline
	OOMKilled bool // killed by the kernel's OOM killer
	Cancelled bool // killed because the caller's context ended
	// Lost: the connection to the daemon broke before it reported the
	// exit (the daemon stopped or restarted); Code is -1, the outcome unknown.
	Lost     bool
	Duration time.Duration
}

// Run executes spec in a fresh container and always removes it.
// A program that fails is an Exit, not an error; errors are infrastructure
// failures (daemon down, image missing, start refused). When ctx ends the
// container is killed at once and Run returns the Exit with Cancelled set
// together with ctx's error.
func (c *Client) Run(ctx context.Context, spec Spec) (exit Exit, err error) {
	id, err := c.Create(ctx, spec)
	if err != nil {
		return Exit{}, err
	}
	defer func() {
		if rerr := c.Remove(ctx, id); rerr != nil {
			c.log.Error("container not removed", "container_id", short(id), "err", rerr)
		}
	}()
	return c.runCreated(ctx, id, spec)
}

func (c *Client) runCreated(ctx context.Context, id string, spec Spec) (Exit, error) {
	hj, err := c.cli().ContainerAttach(ctx, id, container.AttachOptions{
		Stream: true, Stdin: spec.Stdin != nil, Stdout: true, Stderr: true,
	})
	if err != nil {
		return Exit{}, fmt.Errorf("attach container: %w", err)
	}
	// Closing the connection ends the stdin feed and the output copy; waiting
	// for them means nothing touches the caller's reader or writers after Run
	// returned, on any path.
	var streams sync.WaitGroup
	defer func() {
		hj.Close()
		streams.Wait()
	}()
	// The wait must outlive ctx: on cancellation we still kill and collect the exit.
	waiter := c.waitNextExit(ctx, id)
	defer waiter.stop()
	if err := c.cli().ContainerStart(ctx, id, container.StartOptions{}); err != nil {
		return Exit{}, fmt.Errorf("start container: %w", err)
	}
	started := time.Now()
	if spec.Stdin != nil {
		streams.Go(func() { feed(hj.Conn, spec.Stdin, hj.CloseWrite) })
	}
	copyDone := make(chan struct{})
	streams.Go(func() {
		defer close(copyDone)
		// The copy ends when the container's streams close; its error only
		// means the connection broke, which the wait below reports better.
		_, _ = stdcopy.StdCopy(orDiscard(spec.Stdout), orDiscard(spec.Stderr), hj.Reader)
	})

	exit, err := c.await(ctx, id, spec.Timeout, waiter.result)
	exit.Duration = time.Since(started)
	if err != nil && !exit.Cancelled {
		return exit, err
	}
	select {
	case <-copyDone:
	case <-time.After(5 * time.Second):
		c.log.Warn("output stream did not close after exit", "container_id", short(id))
		hj.Close() // closing twice is harmless; OnExit must see the writers quiet
		<-copyDone
	}
	if exit.Code == 137 && !exit.TimedOut && !exit.Cancelled {
		exit.OOMKilled = c.oomKilled(context.WithoutCancel(ctx), id, nil)
	}
	if spec.OnExit != nil && !exit.Cancelled {
		if err := spec.OnExit(ctx, id, exit); err != nil {
			return exit, err
		}
	}
	return exit, err
}

// await waits for the exit, killing the container at the deadline or when
// ctx ends.
func (c *Client) await(ctx context.Context, id string, timeout time.Duration, result <-chan waitResult) (Exit, error) {
	var deadline <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		deadline = t.C
	}
	var exit Exit
	select {
	case r := <-result:
		if r.err != nil {
			return exit, r.err
		}
		return Exit{Code: int(r.resp.StatusCode)}, waitError(r.resp)
	case <-deadline:
		exit.TimedOut = true
	case <-ctx.Done():
		exit.Cancelled = true
	}
	if err := c.Kill(ctx, id); err != nil {
		return exit, err
	}
	select {
	case r := <-result:
		if r.err != nil {
			return exit, fmt.Errorf("killed container: %w", r.err)
		}
		exit.Code = int(r.resp.StatusCode)
	case <-time.After(teardownTimeout):
		return exit, fmt.Errorf("container %s did not stop after SIGKILL", short(id))
	}
	if exit.Cancelled {
		return exit, context.Cause(ctx)
	}
	return exit, nil
}

func waitError(w container.WaitResponse) error {
	if w.Error != nil && w.Error.Message != "" {
		return fmt.Errorf("wait for container: %s", w.Error.Message)
	}
	return nil
}

// oomKilled asks the daemon whether the OOM killer ended the container
// (exit 137): its state, while it still exists, and its recent events (an
// auto-removed container is gone a moment after its exit). The daemon
// learns of an OOM kill from its own event, which may come a moment after
// the exit under load: a "no" is asked again for up to oomSettle before it
// is believed, unless stop (when given) says the answer is known
// elsewhere meanwhile.
func (c *Client) oomKilled(ctx context.Context, id string, stop func() bool) bool {
	deadline := time.Now().Add(oomSettle)
	for {
		ins, err := c.cli().ContainerInspect(ctx, id)
		switch {
		case err == nil && ins.State != nil && ins.State.OOMKilled:
			return true
		case err != nil && !cerrdefs.IsNotFound(err):
			c.log.Warn("inspect after exit", "container_id", short(id), "err", err)
			return false
		case c.sawOOM(ctx, id):
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil || (stop != nil && stop()) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// oomSettle is how long an exit 137 waits for the daemon's OOM event.
// The kernel's notice reaches the daemon apart from the exit, and on a
// busy daemon later than 750 ms (an OOM reported as a plain exit 137 once
// in 210 calls beside a loop of docker runs); only an exit 137 that pybox
// did not cause itself, and that is no OOM kill, waits all of it.
const oomSettle = 3 * time.Second

// feed copies stdin to the container, then half-closes so it sees EOF.
func feed(w io.Writer, r io.Reader, closeWrite func() error) {
	// Write errors mean the program exited without reading all its input,
	// which is the program's business; EOF is sent either way.
	_, _ = io.Copy(w, r)
	_ = closeWrite()
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// createTimeout bounds a container's creation, which runs detached from
// the caller's context.
const createTimeout = time.Minute

// Create only creates the container described by spec and returns its ID;
// the caller owns its removal. The request does not follow ctx: cancelled
// midway, the daemon may still create a container whose ID we never learn.
// If ctx ended meanwhile, the container is removed and ctx's error returned.
//
// Bind mounts are checked twice: before the request, no source may have a
// symlink on its path; after it, the daemon's record of the container must
// hold exactly the requested binds (a mismatch removes it: ErrMount).
func (c *Client) Create(ctx context.Context, spec Spec) (string, error) {
	if spec.Host != nil {
		if err := checkBindSources(spec.Host.Mounts); err != nil {
			return "", err
		}
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), createTimeout)
	defer cancel()
	if err := c.adapt(cctx, spec.Host); err != nil {
		return "", err
	}
	created, err := c.cli().ContainerCreate(cctx, spec.Config, spec.Host, nil, nil, spec.Name)
	if err != nil {
		if spec.Name != "" && answerLost(err) {
			// The request went out but its answer did not come back: the
			// container may exist. Removed by name, now or (the daemon
			// away) by RemoveStrays later.
			_ = c.Remove(ctx, spec.Name)
		}
		return "", fmt.Errorf("create container: %w", c.unreachable(err, false))
	}
	err = c.checkCreated(cctx, created.ID, spec.Host)
	if err == nil && ctx.Err() != nil {
		err = context.Cause(ctx)
	}
	if err != nil {
		if rerr := c.Remove(ctx, created.ID); rerr != nil {
			c.log.Error("container not removed", "container_id", short(created.ID), "err", rerr)
		}
		return "", err
	}
	return created.ID, nil
}

// answerLost reports an error after which a request may have taken effect
// on the daemon without us hearing so: the connection broke mid-exchange
// or the request timed out.
func answerLost(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}
