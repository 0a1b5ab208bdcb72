package sandbox

import (
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/docker/go-units"

	"github.com/pybox-dev/pybox/internal/storage"
)

// ErrQuota: a workspace went, or is, over its storage quota, or the host's
// disk is down to its reserve. A run stopped for it has QuotaExceeded set.
var ErrQuota = errors.New("workspace storage quota exceeded")

// How often a watched workspace is measured: ten times as long as a
// measurement takes (so watching costs at most a tenth of a core), within
// these bounds.
const (
	quotaPollMin = 25 * time.Millisecond
	quotaPollMax = 2 * time.Second
)

// maxMeasured bounds the entries measured when a program starts: a
// workspace with more (a huge folder given as code storage) is refused
// rather than walked at every run.
const maxMeasured = 1_000_000

// quota is the storage bound of one workspace while a program runs on it:
// the configured quota, or what the workspace holds when that is more (a
// program stopped for the quota went somewhat past it): then programs may
// delete files but not make the workspace grow, and the bound comes down
// as they delete.
type quota struct {
	quota   storage.Usage // configured
	limit   storage.Usage // in force: quota, or less than the usage found, if more
	reserve int64         // bytes the host disk keeps free
	dirs    []string
}

// quotaFor measures dirs (a workspace and any folder mounted into it) and
// returns the quota that applies to a program starting on them, or
// ErrQuota when the workspace is far over its quota or the disk is down
// to its reserve.
func (s *Sandbox) quotaFor(dirs ...string) (*quota, error) {
	l := s.cfg.Limits
	q := &quota{quota: storage.Usage{Bytes: l.WorkspaceBytes, Files: l.WorkspaceFiles}, reserve: l.DiskReserve}
	for _, d := range dirs {
		if d != "" {
			q.dirs = append(q.dirs, d)
		}
	}
	if err := q.checkDisk(); err != nil {
		return nil, err
	}
	u, err := measure(q.dirs, storage.Usage{Files: maxMeasured})
	if err != nil {
		return nil, fmt.Errorf("measure the workspace: %w", err)
	}
	if u.Files > maxMeasured {
		return nil, fmt.Errorf("%w: the workspace holds more than %d files and folders (the quota is %s): delete files from it or use a smaller folder as code storage",
			ErrQuota, maxMeasured, describe(q.quota, false))
	}
	q.lower(u)
	return q, nil
}

// watch measures the workspace until stop is called and calls over once,
// from its own goroutine, when the workspace grows past the quota or the
// disk falls to its reserve; the program must then be stopped. stop does
// not wait: a measurement under way finishes on its own (and may still
// call over, which must then be harmless).
func (q *quota) watch(over func(error)) (stop func()) {
	done := make(chan struct{})
	if len(q.dirs) == 0 {
		return func() {}
	}
	go func() {
		timer := time.NewTimer(quotaPollMin)
		defer timer.Stop()
		for {
			select {
			case <-done:
				return
			case <-timer.C:
			}
			start := time.Now()
			if err := q.check(); err != nil {
				over(err)
				return
			}
			timer.Reset(min(max(10*time.Since(start), quotaPollMin), quotaPollMax))
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done) }) }
}

// lower sets the limit from usage u: the quota, or u where u is more.
func (q *quota) lower(u storage.Usage) {
	q.limit = storage.Usage{Bytes: max(q.quota.Bytes, u.Bytes), Files: max(q.quota.Files, u.Files)}
}

// check measures once: nil while the workspace is within its limit, which
// comes down as a workspace over its quota shrinks.
func (q *quota) check() error {
	if err := q.checkDisk(); err != nil {
		return err
	}
	u, err := measure(q.dirs, q.limit)
	if err != nil {
		return nil // a workspace that cannot be measured now is measured again next time
	}
	if !u.Over(q.limit) {
		q.lower(u) // complete: the walk stops only past the limit
		return nil
	}
	return fmt.Errorf("%w: the workspace held %s, over its quota of %s; delete files to make room",
		ErrQuota, describe(u, true), describe(q.quota, false))
}

// checkDisk fails when the disk under the workspace has less than the
// reserve free.
func (q *quota) checkDisk() error { return q.checkDiskFor(0) }

// checkDiskFor fails when the disk under the workspace would have less
// than the reserve free once n more bytes are written.
func (q *quota) checkDiskFor(n int64) error {
	if q.reserve <= 0 || len(q.dirs) == 0 {
		return nil
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(q.dirs[0], &st); err != nil {
		return nil // not measurable: the quota still bounds the workspace
	}
	if free := int64(st.Bavail) * st.Bsize; free-n < q.reserve {
		return fmt.Errorf("%w: the host disk under the workspace has %s free, and pybox keeps %s free; free disk space",
			ErrQuota, units.BytesSize(float64(free)), units.BytesSize(float64(q.reserve)))
	}
	return nil
}

// measure adds up dirs, stopping once the total is over stop.
func measure(dirs []string, stop storage.Usage) (storage.Usage, error) {
	var total storage.Usage
	for _, d := range dirs {
		left := storage.Usage{Bytes: remaining(stop.Bytes, total.Bytes), Files: remaining(stop.Files, total.Files)}
		u, err := storage.Measure(d, left)
		if err != nil {
			return total, err
		}
		total.Bytes += u.Bytes
		total.Files += u.Files
		if total.Over(stop) {
			break
		}
	}
	return total, nil
}

// remaining is what is left of a stop after used; 0 (no stop) stays 0.
func remaining(stop, used int64) int64 {
	if stop <= 0 {
		return 0
	}
	return max(stop-used, 1)
}

// describe renders a usage ("at least" when it was cut short).
func describe(u storage.Usage, atLeast bool) string {
	s := fmt.Sprintf("%s in %d files and folders", units.BytesSize(float64(u.Bytes)), u.Files)
	if atLeast {
		return "at least " + s
	}
	return s
}

// Room fails with ErrQuota when adding a file of size bytes to workspace
// would take it past its quota, or when the disk under it is down to its
// reserve: the file tools check before they write.
func (s *Sandbox) Room(workspace string, size int64) error {
	l := s.cfg.Limits
	q := &quota{quota: storage.Usage{Bytes: l.WorkspaceBytes, Files: l.WorkspaceFiles}, reserve: l.DiskReserve, dirs: []string{workspace}}
	if err := q.checkDisk(); err != nil {
		return err
	}
	if size >= q.quota.Bytes {
		return fmt.Errorf("%w: %s is more than the workspace's whole quota of %s", ErrQuota, units.BytesSize(float64(size)), describe(q.quota, false))
	}
	room := storage.Usage{Bytes: q.quota.Bytes - size, Files: q.quota.Files - 1}
	u, err := measure(q.dirs, room)
	if err != nil {
		return fmt.Errorf("measure the workspace: %w", err)
	}
	if u.Over(room) {
		return fmt.Errorf("%w: the workspace holds %s; with %s more it would pass its quota of %s: delete files to make room",
			ErrQuota, describe(u, true), units.BytesSize(float64(size)), describe(q.quota, false))
	}
	return nil
}
