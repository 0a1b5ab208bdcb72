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

// releaseLease ends this instance's lease at Close. With none of its
// containers left it removes the lease file; otherwise (a run still in
// flight, a failed removal, Docker unreachable) it only unlocks it, so the
// next reaper knows the owner is gone and removes what is left.
func (s *Sandbox) releaseLease() {
	if s.leases.own == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), leaseListTimeout)
	defer cancel()
	left, err := s.eng.List(ctx, map[string]string{LabelManaged: "true", LabelLease: s.owner.Lease})
	if err != nil || len(left) > 0 {
		s.log.Info("lease kept for the next reaper", "lease", s.owner.Lease, "containers", len(left), "err", err)
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
