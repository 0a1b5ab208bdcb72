package sandbox

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/pybox-dev/pybox/internal/storage"
)

// watcher is one program (or session) stopped when its owner goes over.
type watcher struct {
	over func(error)
	once sync.Once
}

// watch has the meter measure the account while a program runs, and call
// over once, from the meter's goroutine, when the owner's storage grows
// past its limit or the disk falls to its reserve; the program must then be
// stopped. stop does not wait (over may still be called, and must then be
// harmless); what the program wrote is measured afterwards.
func (a *Account) watch(over func(error)) (stop func()) {
	w := &watcher{over: over}
	a.mu.Lock()
	a.watchers[w] = struct{}{}
	a.mu.Unlock()
	a.poke()
	var once sync.Once
	return func() {
		once.Do(func() {
			a.mu.Lock()
			delete(a.watchers, w)
			a.changed++
			a.mu.Unlock()
			a.poke()
		})
	}
}

// skipMount leaves the folder mountpoint out of the measurements until
// done: a run's output folder, counted in the runs folder, is mounted
// there (and, depending on mount propagation, may show there on the host
// too).
func (a *Account) skipMount(mountpoint string) (done func()) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.skipLocked(mountpoint)
}

// skipLocked is skipMount, called with mu held. A measurement under way
// may have counted the folder: it walks again (see measure).
func (a *Account) skipLocked(mountpoint string) (done func()) {
	mountpoint = filepath.Clean(mountpoint)
	a.skip[mountpoint]++
	a.skips++
	var once sync.Once
	return func() {
		once.Do(func() {
			a.mu.Lock()
			defer a.mu.Unlock()
			if a.skip[mountpoint]--; a.skip[mountpoint] <= 0 {
				delete(a.skip, mountpoint)
			}
		})
	}
}

// poke wakes the meter to look at what it has to do.
func (a *Account) poke() {
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// meter measures the account while programs run on it, or something
// changed since the last measurement, at most once per pollInterval of
// the last measurement's duration; it ends at close.
func (a *Account) meter() {
	defer close(a.done)
	for {
		wait, busy := a.due()
		diskOnly := busy && wait > diskPoll
		var tick <-chan time.Time
		t := time.NewTimer(min(wait, diskPoll))
		if busy {
			tick = t.C
		}
		select {
		case <-a.stop:
			t.Stop()
			return
		case <-a.wake:
			t.Stop()
			continue
		case <-tick:
		}
		if diskOnly {
			a.checkDisk()
			continue
		}
		_ = a.measure() // logged; the next measurement tries again
	}
}

// due says whether the meter has work, and how long until it may do it.
func (a *Account) due() (time.Duration, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	busy := len(a.watchers) > 0 || a.changed != a.clean
	if !a.known {
		return 0, busy
	}
	return max(time.Until(a.lastEnd.Add(pollInterval(a.took))), 0), busy
}

// ensureKnown measures the account now if it never was (or its folders
// changed).
func (a *Account) ensureKnown() error {
	a.mu.Lock()
	known := a.known
	a.mu.Unlock()
	if known {
		return nil
	}
	return a.measure()
}

// handOver leaves o's folder (a run's outputs, handed to the caller, who
// copies them into the owner's folders, then removes it) out of the
// account until o.Remove, so that its files are not counted twice while
// they are copied: what it holds, measured now (the run's own output, at
// most the limit), comes off the last figure; when it holds more, the
// next refresh measures everything again. Safe on nil.
func (a *Account) handOver(o *Outputs) {
	if o == nil {
		return
	}
	a.mu.Lock()
	stop := a.limit
	a.mu.Unlock()
	if a.fs != nil { // the copy takes room of its own on the filesystem: nothing comes off
		o.handedOver = a.skipMount(o.Dir)
		return
	}
	u, err := measure([]string{o.Dir}, stop, nil)
	a.mu.Lock()
	defer a.mu.Unlock()
	o.handedOver = a.skipLocked(o.Dir) // with what comes off, at once
	if err != nil || u.Over(stop) {
		a.force = true
		return
	}
	a.used = storage.Usage{Bytes: max(a.used.Bytes-u.Bytes, 0), Files: max(a.used.Files-u.Files, 0)}
}

// refresh measures the account now unless its figure is recent: it was
// measured since the last change, or less than one poll interval ago (so
// copy-backs, like the meter, cost at most a bounded share of a core).
func (a *Account) refresh() error {
	a.mu.Lock()
	stale := !a.known || a.force || (a.changed != a.clean && time.Since(a.lastEnd) > pollInterval(a.took))
	a.mu.Unlock()
	if !stale {
		return nil
	}
	return a.measure()
}

// measure walks the account's folders once, records what they hold and
// stops every watched program when the owner is over its limit. Its error
// is a measurement that failed for another reason than a folder the server
// cannot read (which counts as over). A folder left out while it walked
// (a run's output folder handed over, to be copied back) may have been
// counted: it walks again, up to twice, rather than record that (the
// copy-back would judge by it, and refuse even a small file); a third walk
// in that case is recorded but not trusted (the next refresh measures).
func (a *Account) measure() error {
	a.walking.Lock()
	defer a.walking.Unlock()
	for again := 0; ; again++ {
		a.mu.Lock()
		dirs, skip, skips, gen, idle, full := a.dirsLocked(), maps.Clone(a.skip), a.skips, a.changed, len(a.watchers) == 0, !a.known
		stop := a.limit
		if full {
			stop = storage.Usage{Files: maxMeasured}
		}
		a.mu.Unlock()
		start := time.Now()
		u, err := a.measureDirs(dirs, stop, skip)
		took := time.Since(start)
		if err != nil && !errors.Is(err, storage.ErrUnreadable) {
			a.log.Warn("storage not measured", "err", err)
			return fmt.Errorf("measure the workspace: %w", err)
		}
		a.mu.Lock()
		stale := a.skips != skips
		if stale && again < 2 {
			a.mu.Unlock()
			continue
		}
		a.record(u, err, full, took)
		a.force = stale // still a folder left out while it walked: measured again before it is trusted
		if idle {
			a.clean = gen
		}
		over := a.overLocked(u)
		a.mu.Unlock()
		if over != nil {
			a.stopAll(over)
		}
		return nil
	}
}

// measureDirs measures dirs: on the owner's filesystem, when it has one,
// its usage (one statfs) and a walk of only the folders outside it.
func (a *Account) measureDirs(dirs []string, stop storage.Usage, skip map[string]int) (storage.Usage, error) {
	if a.fs == nil {
		return measure(dirs, stop, skip)
	}
	u, err := a.fs.Usage()
	if err != nil {
		return u, err
	}
	a.mu.Lock()
	outside := slices.DeleteFunc(dirs, a.coveredLocked)
	a.mu.Unlock()
	if len(outside) == 0 {
		return u, nil
	}
	v, err := measure(outside, stop, skip)
	return u.Add(v), err
}

// fullNow is, on the owner's own filesystem, why a run that ended by
// itself met the quota: the owner is over it, so the kernel refused the
// run's writes past the headroom (ENOSPC). nil otherwise, and always with
// the meter (which stops the programs itself).
func (a *Account) fullNow() error {
	if a.fs == nil {
		return nil
	}
	u, err := a.fs.Usage()
	if err != nil || !u.Over(a.quota) {
		return nil
	}
	return fmt.Errorf("%w: the workspace holds %s, over its quota of %s, and writes past it were refused (no space left on device): delete files to make room",
		ErrQuota, describe(u, false), describe(a.quota, false))
}

// checkDisk stops every watched program when the disk is down to its
// reserve (between two measurements).
func (a *Account) checkDisk() {
	a.mu.Lock()
	err := checkDisk(a.hostDir(a.anyDirLocked()), a.reserve, 0)
	a.mu.Unlock()
	if err != nil {
		a.stopAll(err)
	}
}

// stopAll calls every watcher's over with why.
func (a *Account) stopAll(why error) {
	a.mu.Lock()
	stopped := make([]*watcher, 0, len(a.watchers))
	for w := range a.watchers {
		stopped = append(stopped, w)
	}
	a.mu.Unlock()
	for _, w := range stopped {
		w.once.Do(func() { w.over(why) })
	}
}

// record keeps a measurement: the limit comes down as an owner over its
// quota shrinks (a walk is complete only while within it).
func (a *Account) record(u storage.Usage, unread error, full bool, took time.Duration) {
	a.used, a.unread, a.known, a.took, a.lastEnd, a.force = u, unread, true, took, time.Now(), false
	if full || !u.Over(a.limit) {
		held := u
		if a.fs != nil { // a filesystem counts blocks: a program's own file and folder take some
			held = u.Add(fsSlack)
		}
		a.limit = storage.Usage{Bytes: max(a.quota.Bytes, held.Bytes), Files: max(a.quota.Files, held.Files)}
	}
}

// fsSlack is what an owner over its quota may add, on a filesystem of its
// own, in a run that deletes files: the blocks of the program's file and
// of the folders it changes (the kernel bounds the owner anyway).
var fsSlack = storage.Usage{Bytes: 64 << 10, Files: 8}

// overLocked is why the watched programs must stop after measuring u, or
// nil.
func (a *Account) overLocked(u storage.Usage) error {
	if err := a.unreadLocked(); err != nil {
		return err
	}
	if err := checkDisk(a.hostDir(a.anyDirLocked()), a.reserve, 0); err != nil {
		return err
	}
	if total := u.Add(a.reserved); total.Over(a.limit) {
		return fmt.Errorf("%w: the workspace held %s, over its quota of %s; delete files to make room",
			ErrQuota, describe(total, true), describe(a.quota, false))
	}
	return nil
}
