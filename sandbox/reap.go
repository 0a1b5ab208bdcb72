package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/pybox-dev/pybox/internal/engine"
	"github.com/pybox-dev/pybox/internal/lease"
)

// ReapOrphans removes the containers of owners that are certainly gone and
// returns how many it removed. An owner is certainly gone when its lease
// file is in this sandbox's lease dir and nobody holds its lock (the kernel
// dropped it when the owner died, in whatever PID namespace); its lease
// file goes with its containers. Containers without a lease label, whose
// lease is in another folder or missing, or whose lease is held, are never
// touched: a hostname and a pid prove nothing across PID namespaces.
// Without a lease dir it removes nothing, except what the backend finds
// orphaned by its own rules (Kubernetes: pods long finished; see
// kube.Backend.ReapOrphans).
func (s *Sandbox) ReapOrphans(ctx context.Context) (int, error) {
	n := 0
	if r, ok := s.eng.(orphanReaper); ok {
		k, err := r.ReapOrphans(ctx)
		if n += k; err != nil {
			return n, err
		}
	}
	if s.leases.dir == nil {
		return n, nil
	}
	ids, err := s.leases.dir.IDs()
	if err != nil {
		return n, fmt.Errorf("reap: %w", err)
	}
	for _, id := range ids {
		if id == s.owner.ID {
			continue
		}
		k, err := s.reapOwner(ctx, id)
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// reapOwner removes owner id's containers and lease file if it is gone.
// Only Docker failures are errors; a lease it cannot check is logged.
func (s *Sandbox) reapOwner(ctx context.Context, id string) (int, error) {
	l, err := s.leases.dir.TryTake(id)
	switch {
	case errors.Is(err, lease.ErrHeld), errors.Is(err, fs.ErrNotExist):
		return 0, nil // alive, or cleaned up by another reaper
	case err != nil:
		s.log.Warn("lease not checked", "owner", id, "err", err)
		return 0, nil
	}
	list, err := s.eng.List(ctx, map[string]string{LabelManaged: "true", LabelOwner: id, LabelLease: l.Path()})
	if err != nil {
		return 0, errors.Join(err, l.Release()) // the file stays: a later reap retries
	}
	n := s.removeAll(ctx, list)
	if n < len(list) {
		return n, l.Release() // the file stays: a later reap retries
	}
	s.removeRunsOf(id)
	return n, l.Remove()
}

// removeRunsOf removes the run output and staging folders a gone owner
// left (its containers are gone, so nothing writes there any more).
func (s *Sandbox) removeRunsOf(id string) {
	for _, parent := range []string{s.cfg.RunsDir, s.cfg.StagingDir} {
		if parent == "" {
			continue
		}
		dir := filepath.Join(parent, id) // id is 32 hex digits (lease.Dir checks), never a path
		if err := os.RemoveAll(dir); err != nil {
			s.log.Warn("a gone owner's run output or staging folders were not removed", "dir", dir, "err", err)
		}
	}
}

// TempDir makes a new folder, named from pattern as os.MkdirTemp does, for
// host-side work that goes with this instance (see Config.StagingDir):
// whatever the caller does not remove goes when the instance closes or,
// if it is killed, when the next instance on its lease dir reaps it.
func (s *Sandbox) TempDir(pattern string) (string, error) {
	if s.staging == "" {
		return os.MkdirTemp("", pattern)
	}
	if err := os.MkdirAll(s.staging, 0o700); err != nil {
		return "", err
	}
	return os.MkdirTemp(s.staging, pattern)
}

// removeAll removes the containers in list and returns how many it removed.
func (s *Sandbox) removeAll(ctx context.Context, list []engine.Summary) int {
	n := 0
	for _, c := range list {
		if err := s.eng.Remove(ctx, c.ID); err != nil {
			s.log.Warn("orphan not removed", "container_id", c.ID, "err", err)
			continue
		}
		s.log.Info("removed orphaned container", "container_id", c.ID, "name", c.Name, "owner", c.Labels[LabelOwner])
		n++
	}
	return n
}
