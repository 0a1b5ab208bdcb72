package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/filters"
)

// ContainerEvents returns the actions ("create", "start", "destroy", ...)
// of containers carrying all labels between since and until, in order.
func (c *Client) ContainerEvents(ctx context.Context, since, until time.Time, labels map[string]string) ([]string, error) {
	args := labelFilter(labels)
	args.Add("type", string(events.ContainerEventType))
	msgs, errs := c.cli().Events(ctx, events.ListOptions{
		Since: unixNano(since), Until: unixNano(until), Filters: args,
	})
	var out []string
	for {
		select {
		case m := <-msgs:
			out = append(out, string(m.Action))
		case err := <-errs:
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return out, fmt.Errorf("container events: %w", err)
		}
	}
}

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
// whose label skipKey has the value skipValue. It follows the daemon's
// live stream: a query of past events after the fact (ContainerEvents)
// reads the daemon's short ring of recent events (256 on Docker), which a
// busy daemon overwrites within seconds.
func (c *Client) WatchContainerCreates(ctx context.Context, labels map[string]string, skipKey, skipValue string) (stop func() (int, error)) {
	ctx, cancel := context.WithCancel(ctx)
	args := labelFilter(labels)
	args.Add("type", string(events.ContainerEventType))
	args.Add("event", string(events.ActionCreate))
	msgs, errs := c.cli().Events(ctx, events.ListOptions{Since: unixNano(time.Now().Add(-50 * time.Millisecond)), Filters: args})
	done := make(chan struct{})
	var n int
	var err error
	go func() {
		defer close(done)
		for {
			select {
			case m := <-msgs:
				if m.Actor.Attributes[skipKey] != skipValue {
					n++
				}
			case e := <-errs:
				if ctx.Err() == nil {
					err = fmt.Errorf("container events: %w", e)
				}
				return
			}
		}
	}()
	return func() (int, error) {
		cancel()
		<-done
		return n, err
	}
}
