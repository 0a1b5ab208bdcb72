package engine

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
)

// ErrMount: a bind mount's source is not the plain directory path that was
// asked for, or the daemon recorded other mounts than those requested.
var ErrMount = errors.New("refused bind mount")

// checkBindSources refuses bind mounts whose source path resolves to
// something else than itself: a symlink in any component (which a program
// could have planted, or swapped in between a host-side check and the
// daemon's mount) or a source that is not an absolute, clean path.
func checkBindSources(mounts []mount.Mount) error {
	for _, m := range mounts {
		if m.Type != mount.TypeBind {
			continue
		}
		if !filepath.IsAbs(m.Source) || filepath.Clean(m.Source) != m.Source {
			return fmt.Errorf("%w: source %q is not a clean absolute path", ErrMount, m.Source)
		}
		real, err := filepath.EvalSymlinks(m.Source)
		if err != nil {
			return fmt.Errorf("%w: source %s: %v", ErrMount, m.Source, err)
		}
		if real != m.Source {
			return fmt.Errorf("%w: source %s resolves to %s (a symlink on its path)", ErrMount, m.Source, real)
		}
	}
	return nil
}

// verifyMounts compares the bind mounts the daemon recorded for a created
// container with those requested: same sources, targets and modes, and no
// other bind mount. A source Docker Desktop recorded in its own spelling
// of the same host folder (see desktopSpellings) counts as the same.
func verifyMounts(ins container.InspectResponse, want []mount.Mount) error {
	var binds []string
	spelt := map[string]string{}
	for _, m := range want {
		if m.Type == mount.TypeBind {
			binds = append(binds, bindKey(m.Source, m.Target, !m.ReadOnly))
			for _, s := range desktopSpellings(m.Source) {
				spelt[s] = m.Source
			}
		}
	}
	var got []string
	for _, m := range ins.Mounts {
		if m.Type == mount.TypeBind {
			src := m.Source
			if asked, ok := spelt[src]; ok {
				src = asked
			}
			got = append(got, bindKey(src, m.Destination, m.RW))
		}
	}
	slices.Sort(binds)
	slices.Sort(got)
	if !slices.Equal(binds, got) {
		return fmt.Errorf("%w: the daemon recorded %v, pybox asked for %v", ErrMount, got, binds)
	}
	return nil
}

func bindKey(src, dst string, rw bool) string {
	return fmt.Sprintf("%s:%s:rw=%v", src, dst, rw)
}

// checkCreated inspects a created container and verifies its mounts.
func (c *Client) checkCreated(ctx context.Context, id string, host *container.HostConfig) error {
	if host == nil || len(host.Mounts) == 0 {
		return nil
	}
	ins, err := c.cli().ContainerInspect(ctx, id)
	if err != nil {
		return fmt.Errorf("inspect created container: %w", c.unreachable(err, false))
	}
	return verifyMounts(ins, host.Mounts)
}
