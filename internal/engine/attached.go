package engine

import (
	"context"
	"fmt"
	"io"
	"sync"

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
	done   chan struct{} // closed when the container has exited
	exit   Exit
	pumpWG sync.WaitGroup
	once   sync.Once
}

// StartAttached creates and starts spec's container with stdin open.
// spec.Stderr receives the container's stderr; spec.Stdin and Timeout are
// ignored (the caller writes with Write and enforces its own deadlines).
func (c *Client) StartAttached(ctx context.Context, spec Spec) (*Attached, error) {
	spec.Config.OpenStdin, spec.Config.AttachStdin, spec.Config.StdinOnce = true, true, false
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
	bg := context.WithoutCancel(ctx)
	hj, err := c.api.ContainerAttach(ctx, id, container.AttachOptions{Stream: true, Stdin: true, Stdout: true, Stderr: true})
	if err != nil {
		return nil, fmt.Errorf("attach container: %w", err)
	}
	waitC, waitErrC := c.api.ContainerWait(bg, id, container.WaitConditionNextExit)
	if err := c.api.ContainerStart(ctx, id, container.StartOptions{}); err != nil {
		hj.Close()
		return nil, fmt.Errorf("start container: %w", err)
	}
	pr, pw := io.Pipe()
	a := &Attached{ID: id, Stdout: pr, c: c, hj: hj, done: make(chan struct{})}
	a.pumpWG.Add(2)
	go func() {
		defer a.pumpWG.Done()
		_, err := stdcopy.StdCopy(pw, orDiscard(stderr), hj.Reader)
		pw.CloseWithError(err) // a nil err gives readers io.EOF
	}()
	go func() {
		defer a.pumpWG.Done()
		defer close(a.done)
		select {
		case w := <-waitC:
			a.exit.Code = int(w.StatusCode)
		case err := <-waitErrC:
			c.log.Warn("waiting for session container", "container_id", short(id), "err", err)
			a.exit.Code = -1
		}
		if a.exit.Code == 137 {
			a.exit.OOMKilled = c.oomKilled(bg, id)
		}
	}()
	return a, nil
}

// Write sends p to the container's stdin.
func (a *Attached) Write(p []byte) (int, error) { return a.hj.Conn.Write(p) }

// Done is closed once the container has exited.
func (a *Attached) Done() <-chan struct{} { return a.done }

// Exit is how the container ended; valid after Done is closed.
func (a *Attached) Exit() Exit { return a.exit }

// Destroy kills and removes the container and waits for its goroutines.
// It is idempotent and runs on a detached, time-limited context.
func (a *Attached) Destroy(ctx context.Context) error {
	var err error
	a.once.Do(func() {
		err = a.c.Remove(ctx, a.ID) // force-remove kills it first
		a.hj.Close()
		a.pumpWG.Wait()
	})
	return err
}
