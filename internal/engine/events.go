package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/volume"
)

// sawOOM reports whether the daemon's recent events hold an OOM kill of
// container id.
func (c *Client) sawOOM(ctx context.Context, id string) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	args := filters.NewArgs(filters.Arg("type", string(events.ContainerEventType)), filters.Arg("container", id),
		filters.Arg("event", string(events.ActionOOM)))
	now := time.Now()
	msgs, errs := c.cli().Events(ctx, events.ListOptions{Since: unixNano(now.Add(-oomLookback)), Until: unixNano(now), Filters: args})
	select {
	case <-msgs:
		return true
	case <-errs: // the end of the events until now, or a failure: none seen
		return false
	}
}

// oomLookback is how far back sawOOM looks: further than any run lasts.
const oomLookback = 24 * time.Hour

func unixNano(t time.Time) string {
	return strconv.FormatInt(t.Unix(), 10) + "." + fmt.Sprintf("%09d", t.Nanosecond())
}

// WatchContainerCreates counts, from now until the returned stop is
// called, the creations of containers carrying all labels, except those
// whose label skipKey ("": none) has the value skipValue. It follows the daemon's
// live stream, not a query of past events after the fact, which reads the
// daemon's short ring of recent events (256 on Docker) that a busy daemon
// overwrites within seconds. Both ends are marks in that stream, not
// times: a volume of its own, created (and removed) when the watch starts
// and when stop is called, whose event the daemon sends after every event
// before it. So it returns once the daemon streams to it, and stop counts
// every creation made before it was called, however late the stream.
func (c *Client) WatchContainerCreates(ctx context.Context, labels map[string]string, skipKey, skipValue string) (stop func() (int, error)) {
	return c.WatchCreates(ctx, func(have map[string]string) bool {
		return hasLabels(have, labels) && (skipKey == "" || have[skipKey] != skipValue)
	})
}

// WatchCreates is WatchContainerCreates for the containers whose labels
// match accepts. It calls match from one goroutine, in the stream's order,
// and every call has returned when stop returns.
func (c *Client) WatchCreates(ctx context.Context, match func(labels map[string]string) bool) (stop func() (int, error)) {
	ctx, cancel := context.WithCancel(ctx)
	args := filters.NewArgs(filters.Arg("type", string(events.ContainerEventType)), filters.Arg("type", string(events.VolumeEventType)),
		filters.Arg("event", string(events.ActionCreate)))
	// Since: the stream may open after the start mark is made; what came
	// before that mark is not counted.
	msgs, errs := c.cli().Events(ctx, events.ListOptions{Since: unixNano(time.Now().Add(-time.Second)), Filters: args})
	id := watchMark + strconv.FormatInt(time.Now().UnixNano(), 36) + "-"
	w := &createWatch{match: match, start: id + "start", stop: id + "stop",
		marks: make(chan string, 2), done: make(chan struct{})}
	go w.follow(ctx, msgs, errs)
	if err := c.mark(ctx, w, w.start); err != nil {
		cancel()
		<-w.done
		return func() (int, error) { return 0, err }
	}
	return func() (int, error) {
		err := c.mark(ctx, w, w.stop)
		cancel()
		<-w.done
		return w.n, err
	}
}

// createWatch is one WatchContainerCreates: its stream's reader counts
// the matching creations between its two marks (volume names), and hands
// them on as it sees them.
type createWatch struct {
	match       func(map[string]string) bool
	start, stop string
	marks       chan string
	done        chan struct{}
	n           int   // read after done
	err         error // the stream's failure; read after done
}

func (w *createWatch) follow(ctx context.Context, msgs <-chan events.Message, errs <-chan error) {
	defer close(w.done)
	counting := false
	for {
		select {
		case m := <-msgs:
			switch {
			case m.Type == events.VolumeEventType:
				if m.Actor.ID == w.start || m.Actor.ID == w.stop {
					counting = m.Actor.ID == w.start
					w.marks <- m.Actor.ID // two at most: never blocks
				}
			case counting && m.Type == events.ContainerEventType && w.match(m.Actor.Attributes):
				w.n++
			}
		case e := <-errs:
			if ctx.Err() == nil {
				w.err = fmt.Errorf("container events: %w", e)
			}
			return
		}
	}
}

// watchMark starts the names of WatchContainerCreates's mark volumes.
const watchMark = "pybox-watch-"

// mark creates (and removes) the volume name and waits, up to a minute,
// until w's stream has delivered its creation: every earlier event has
// been delivered then.
func (c *Client) mark(ctx context.Context, w *createWatch, name string) error {
	if _, err := c.cli().VolumeCreate(ctx, volume.CreateOptions{Name: name}); err != nil {
		return fmt.Errorf("container events: a mark in the stream: %w", err)
	}
	defer func() {
		// A failure leaves an unused volume of no size, named for what it was.
		_ = c.cli().VolumeRemove(context.WithoutCancel(ctx), name, true)
	}()
	wait := time.NewTimer(time.Minute)
	defer wait.Stop()
	for {
		select {
		case got := <-w.marks:
			if got == name {
				return nil
			}
		case <-w.done:
			return fmt.Errorf("container events: the stream ended before its mark: %w", w.err)
		case <-wait.C:
			return errors.New("container events: the daemon did not stream a mark within a minute")
		}
	}
}

func hasLabels(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}
