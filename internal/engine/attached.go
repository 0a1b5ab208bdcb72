package engine

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"
)

// Attached is a long-lived container whose stdin, stdout and stderr stay
// connected (a session's kernel). Create it with StartAttached; Destroy it.
type Attached struct {
	ID     string
	Stdout io.Reader // the container's stdout, demultiplexed

	c      *Client
	hj     types.HijackedResponse
	out    *io.PipeReader // Stdout, closed by Destroy
	waiter *exitWaiter
	done   chan struct{} // closed when the container has exited
	ended  chan struct{} // closed when its output stream has ended
	exit   Exit
	pumpWG sync.WaitGroup
	once   sync.Once
	// killing is set by Destroy (an exit after it is pybox's own kill) and
	// by ExitExplained (the runner has said whether the OOM killer ended
	// it): either way, no OOM kill worth waiting for the daemon's word on.
	killing atomic.Bool
}

// StartAttached creates and starts spec's container with stdin open.
// spec.Stderr receives the container's stderr; spec.Stdin and Timeout are
// ignored (the caller writes with Write and enforces its own deadlines).
//
// The container does not outlive its attachment: its stdin closes when
// the attach connection does (StdinOnce), which ends the runner, and the
// daemon removes it once it has exited (AutoRemove). So a server that dies
// (kill -9, OOM) leaves no container running or stopped behind.
func (c *Client) StartAttached(ctx context.Context, spec Spec) (*Attached, error) {
	spec.Config.OpenStdin, spec.Config.AttachStdin, spec.Config.StdinOnce = true, true, true
	host := container.HostConfig{}
	if spec.Host != nil {
		host = *spec.Host
	}
	host.AutoRemove = true
	spec.Host = &host
	id, err := c.Create(ctx, spec)
	if err != nil {
		return nil, err
	}
	a, err := c.attach(ctx, id, spec.Stderr)
	if err != nil {
		if rerr := c.Remove(ctx, id); rerr != nil {
			c.log.Error("container not removed", "container_id", short(id), "err", rerr)
		}
		return nil, err
	}
	return a, nil
}

func (c *Client) attach(ctx context.Context, id string, stderr io.Writer) (*Attached, error) {
	hj, err := c.cli().ContainerAttach(ctx, id, container.AttachOptions{Stream: true, Stdin: true, Stdout: true, Stderr: true})
	if err != nil {
		return nil, fmt.Errorf("attach container: %w", err)
	}
	waiter := c.waitNextExit(ctx, id)
	if err := c.cli().ContainerStart(ctx, id, container.StartOptions{}); err != nil {
		waiter.stop()
		hj.Close()
		return nil, fmt.Errorf("start container: %w", err)
	}
	pr, pw := io.Pipe()
	a := &Attached{ID: id, Stdout: pr, c: c, hj: hj, out: pr, waiter: waiter, done: make(chan struct{}), ended: make(chan struct{})}
	a.pumpWG.Go(func() {
		defer close(a.ended)
		_, err := stdcopy.StdCopy(pw, orDiscard(stderr), hj.Reader)
		pw.CloseWithError(err) // a nil err gives readers io.EOF
	})
	a.pumpWG.Go(func() {
		defer close(a.done)
		a.exit = c.attachedExit(context.WithoutCancel(ctx), id, <-waiter.result, &a.killing)
	})
	return a, nil
}

// attachedExit turns the wait's answer into an Exit, checking for OOM
// unless pybox killed the container itself.
func (c *Client) attachedExit(ctx context.Context, id string, r waitResult, killing *atomic.Bool) Exit {
	if r.err != nil {
		c.log.Warn("lost the wait for a container's exit", "container_id", short(id), "err", r.err)
		return Exit{Code: -1, Lost: true}
	}
	exit := Exit{Code: int(r.resp.StatusCode)}
	if exit.Code == 137 && !killing.Load() {
		exit.OOMKilled = c.oomKilled(ctx, id, killing.Load)
	}
	return exit
}

// ExitExplained says that pybox knows already whether the OOM killer
// ended the container (its runner said so, from its cgroup's count): an
// exit 137 does not wait for the daemon's word on it, and a wait under
// way stops.
func (a *Attached) ExitExplained() { a.killing.Store(true) }

// ContainerID is the container's ID.
func (a *Attached) ContainerID() string { return a.ID }

// Output is the container's stdout, demultiplexed.
func (a *Attached) Output() io.Reader { return a.Stdout }

// Write sends p to the container's stdin.
func (a *Attached) Write(p []byte) (int, error) { return a.hj.Conn.Write(p) }

// Broken reports whether the container's output stream has ended (it
// exited, or the connection to the daemon broke): nothing more can be
// exchanged with it.
func (a *Attached) Broken() bool {
	select {
	case <-a.ended:
		return true
	default:
		return false
	}
}

// Done is closed once the container has exited.
func (a *Attached) Done() <-chan struct{} { return a.done }

// Exit is how the container ended; valid after Done is closed.
func (a *Attached) Exit() Exit { return a.exit }

// Destroy kills and removes the container and waits for its goroutines.
// It is idempotent and runs on a detached, time-limited context.
func (a *Attached) Destroy(ctx context.Context) error {
	var err error
	a.once.Do(func() {
		// Streams first: between programs nobody reads Stdout, so our copy
		// may be blocked writing into the pipe, and the daemon's copy behind
		// it, which stalls the removal until its timeout.
		a.killing.Store(true)
		a.hj.Close()
		a.out.Close()
		err = a.c.Remove(ctx, a.ID) // force-remove kills it first
		if err != nil {
			a.waiter.stop() // it may still run, and its exit never come
		}
		a.pumpWG.Wait()
		a.waiter.stop()
	})
	return err
}
