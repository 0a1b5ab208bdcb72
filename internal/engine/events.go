package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/docker/docker/api/types/events"
)

// ContainerEvents returns the actions ("create", "start", "destroy", ...)
// of containers carrying all labels between since and until, in order.
func (c *Client) ContainerEvents(ctx context.Context, since, until time.Time, labels map[string]string) ([]string, error) {
	args := labelFilter(labels)
	args.Add("type", string(events.ContainerEventType))
	msgs, errs := c.api.Events(ctx, events.ListOptions{
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

func unixNano(t time.Time) string {
	return strconv.FormatInt(t.Unix(), 10) + "." + fmt.Sprintf("%09d", t.Nanosecond())
}
