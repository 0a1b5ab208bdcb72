package sandbox

import (
	"context"
	"fmt"
	"time"

	"github.com/pybox-dev/pybox/internal/lease"
)

// leaseListTimeout bounds the look for containers left at Close.
const leaseListTimeout = 10 * time.Second

// leases are this instance's own lease and the folder of everyone's; zero
// when the sandbox has no lease dir.
type leases struct {
	dir *lease.Dir
	own *lease.Lease
}

// takeLease opens the lease folder path and takes a lease for o, whose
// containers are then labelled with it. An empty path takes none.
func takeLease(path string, o *Owner) (leases, error) {
	if path == "" {
		return leases{}, nil
	}
	dir, err := lease.Open(path)
	if err != nil {
		return leases{}, fmt.Errorf("sandbox: %w", err)
	}
	own, err := dir.Acquire(o.ID)
	if err != nil {
		dir.Close()
		return leases{}, fmt.Errorf("sandbox: %w", err)
	}
	o.Lease = own.Path()
	return leases{dir: dir, own: own}, nil
}

// releaseLease ends this instance's lease at Close. Every container
// still labelled with it is this instance's (it sets the label itself,
// and no program can create containers) whether or not it knows the
// container: one whose create reached the daemon while the answer was
// lost (the connection cut mid-request; a removal by name made at once
// can come before the daemon is done creating it) has no id here. So
// it removes them all first. With none left it removes the lease file;
// otherwise (a removal failed, Docker unreachable) it only unlocks it,
// so the next reaper knows the owner is gone and removes what is left.
func (s *Sandbox) releaseLease() {
	if s.leases.own == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), leaseListTimeout)
	defer cancel()
	list, err := s.eng.List(ctx, map[string]string{LabelManaged: "true", LabelOwner: s.owner.ID, LabelLease: s.owner.Lease})
	left := len(list)
	if err == nil {
		left -= s.removeAll(ctx, list)
	}
	if err != nil || left > 0 {
		s.log.Info("lease kept for the next reaper", "lease", s.owner.Lease, "containers", left, "err", err)
		err = s.leases.own.Release()
	} else {
		err = s.leases.own.Remove()
	}
	if err != nil {
		s.log.Warn("lease not released", "lease", s.owner.Lease, "err", err)
	}
	if err := s.leases.dir.Close(); err != nil {
		s.log.Warn("lease folder not closed", "err", err)
	}
}
