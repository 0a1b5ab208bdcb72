package engine

import (
	"context"
	"fmt"

	"github.com/docker/docker/api/types/container"
)

// exitWaiter relays a container's next exit. Docker's ContainerWait answers
// on an unbuffered channel from a goroutine that nothing can stop once the
// answer is in, so a caller that returns early (start refused, kill failed)
// would leave that goroutine and its connection blocked for ever. The
// waiter always takes the answer, and stop cancels the request and waits
// for the relay, so every path can end it.
type exitWaiter struct {
	result chan waitResult // buffered: the relay never blocks
	cancel context.CancelFunc
	done   chan struct{}
}

// waitResult is the daemon's answer, or why there is none.
type waitResult struct {
	resp container.WaitResponse
	err  error
}

// waitNextExit registers for id's next exit; call it before starting the
// container, and stop it on every path.
func (c *Client) waitNextExit(ctx context.Context, id string) *exitWaiter {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	waitC, errC := c.cli().ContainerWait(ctx, id, container.WaitConditionNextExit)
	w := &exitWaiter{result: make(chan waitResult, 1), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		select {
		case resp := <-waitC:
			w.result <- waitResult{resp: resp}
		case err := <-errC:
			w.result <- waitResult{err: fmt.Errorf("wait for container: %w", err)}
		}
	}()
	return w
}

// stop ends the wait request and its relay. It is idempotent.
func (w *exitWaiter) stop() {
	w.cancel()
	<-w.done
}
