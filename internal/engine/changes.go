package engine

import (
	"context"
	"fmt"

	"github.com/docker/docker/api/types/container"
)

// Changes lists what the container id changed in its filesystem (its
// writable layer, which a commit would capture): every added, modified
// and deleted path, including the directories above a change, which the
// copy-up marks as modified. Mounts (binds, tmpfs) are not part of it.
func (c *Client) Changes(ctx context.Context, id string) ([]container.FilesystemChange, error) {
	changes, err := c.cli().ContainerDiff(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("list changes of container %s: %w", short(id), c.unreachable(err, false))
	}
	return changes, nil
}
