package sandbox

import (
	"errors"
	"fmt"
	"path/filepath"
	"syscall"
	"time"

	"github.com/docker/go-units"

	"github.com/pybox-dev/pybox/internal/storage"
)

// ErrQuota: an owner's storage went, or is, over its quota, or the host's
// disk is down to its reserve. A run stopped for it has QuotaExceeded set.
var ErrQuota = errors.New("workspace storage quota exceeded")

// NoRoom reports whether err is a filesystem's refusal for room (ENOSPC,
// EDQUOT): the owner's quota filesystem, or the disk, is full.
func NoRoom(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// How often an account with programs running is measured: ten times as
// long as a measurement takes (so measuring costs at most a tenth of a
// core per owner, whatever an earlier run left), within these bounds. The
// disk's free space, which costs one statfs, is checked every diskPoll in
// between.
const (
	quotaPollMin = 25 * time.Millisecond
	quotaPollMax = 10 * time.Second
	diskPoll     = 250 * time.Millisecond
)

// maxMeasured bounds the entries of an account's first measurement: an
// owner with more (a huge folder given as code storage) is refused rather
// than walked again and again.
const maxMeasured = 1_000_000

// pollInterval is the pause after a measurement that took took.
func pollInterval(took time.Duration) time.Duration {
	return min(max(10*took, quotaPollMin), quotaPollMax)
}

// checkDisk fails when the disk under dir has less than reserve bytes
// free, or would have with need more bytes written.
func checkDisk(dir string, reserve, need int64) error {
	if reserve <= 0 || dir == "" {
		return nil
	}
	free, ok := diskFree(dir)
	if !ok {
		return nil // not measurable: the quota still bounds the owner
	}
	if free-need < reserve {
		return fmt.Errorf("%w: the host disk under the workspace has only %s free, and pybox keeps %s free; free disk space",
			ErrQuota, units.BytesSize(float64(free)), units.BytesSize(float64(reserve)))
	}
	return nil
}

// measure adds up dirs, stopping once the total is over stop, without
// descending into the folders of skip (absolute paths).
func measure(dirs []string, stop storage.Usage, skip map[string]int) (storage.Usage, error) {
	var total storage.Usage
	var unreadable error
	for _, d := range dirs {
		left := storage.Usage{Bytes: remaining(stop.Bytes, total.Bytes), Files: remaining(stop.Files, total.Files)}
		u, err := storage.MeasureExcept(d, left, relative(d, skip))
		if err != nil && !errors.Is(err, storage.ErrUnreadable) {
			return total, err
		}
		unreadable = cmpOr(unreadable, err)
		total = total.Add(u)
		if total.Over(stop) {
			break
		}
	}
	return total, unreadable
}

// relative is the folders of skip under dir, relative to it.
func relative(dir string, skip map[string]int) map[string]bool {
	var rel map[string]bool
	for p := range skip {
		if r, err := filepath.Rel(dir, p); err == nil && within(p, dir) && p != dir {
			if rel == nil {
				rel = map[string]bool{}
			}
			rel[filepath.ToSlash(r)] = true
		}
	}
	return rel
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
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
// would take its owner's storage past the quota, or when the disk under
// it is down to its reserve: the file tools check before they write. What
// it lets through is charged to the account at once.
func (s *Sandbox) Room(workspace string, size int64) error {
	return s.acct.room(workspace, size)
}
