package sandbox

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/docker/go-units"

	"github.com/pybox-dev/pybox/internal/storage"
)

// Account is the storage of one owner (a Sandbox; over HTTP, a tenant):
// every folder its programs and tools write to (the code storage, the
// sessions folder, the output folders of the runs under way) bounded
// together by one quota (Limits.WorkspaceBytes and WorkspaceFiles), with
// what callers reserved for copies under way on top. One meter measures
// it for every run at once, at a bounded share of a core (see
// pollInterval), so neither concurrent runs nor what an earlier run left
// multiply the bound or the cost. Safe for concurrent use.
type Account struct {
	fs      Filesystem // the owner's folders on a filesystem of their own; nil: walked
	quota   storage.Usage
	reserve int64 // bytes the host disk keeps free
	log     *slog.Logger

	walking sync.Mutex // one measurement at a time

	mu       sync.Mutex
	fixed    []string       // folders always counted
	extra    map[string]int // workspaces outside them, counted while in use
	skip     map[string]int // mountpoints of run output folders, counted in the runs folder
	skips    uint64         // bumped by each folder added to skip
	known    bool           // measured at least once
	force    bool           // the figure is off: the next refresh measures
	used     storage.Usage  // the last measurement, plus what was charged since
	unread   error          // the last measurement met a folder it cannot read
	limit    storage.Usage  // in force: the quota, or what the owner held when more (it may only shrink)
	took     time.Duration  // how long the last measurement took
	lastEnd  time.Time      // when it ended
	reserved storage.Usage
	watchers map[*watcher]struct{}
	changed  uint64 // bumped by whatever may have changed the folders
	clean    uint64 // the value of changed the last measurement covered
	wake     chan struct{}
	stop     chan struct{}
	done     chan struct{}
}

// newAccount starts the account of folders dirs (nested ones are counted
// once) under limits, on fs when it is not nil; close ends its meter.
func newAccount(l Limits, log *slog.Logger, fs Filesystem, dirs ...string) *Account {
	a := &Account{fs: fs, quota: storage.Usage{Bytes: l.WorkspaceBytes, Files: l.WorkspaceFiles}, reserve: l.DiskReserve, log: log,
		extra: map[string]int{}, skip: map[string]int{}, watchers: map[*watcher]struct{}{},
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	a.limit = a.quota
	for _, d := range dirs {
		if d != "" && !a.coveredLocked(d) {
			a.fixed = append(a.fixed, filepath.Clean(d))
		}
	}
	go a.meter()
	return a
}

// close stops the meter and waits for it.
func (a *Account) close() {
	close(a.stop)
	<-a.done
}

// Reserve sets aside room for u (bytes and entries) that the caller is
// about to write into the owner's folders, such as a run's outputs copied
// into code storage. It fails with ErrQuota, before anything is written,
// when the owner's storage with what is reserved and u would pass the
// quota, or the disk would fall below its reserve. The caller must call
// release once, when the write is done or abandoned: u is then charged
// until the next measurement sees what was really written.
func (a *Account) Reserve(u storage.Usage) (release func(), err error) {
	if err := a.ensureKnown(); err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := checkDisk(a.hostDir(a.anyDirLocked()), a.reserve, u.Bytes+a.reserved.Bytes); err != nil {
		return nil, err
	}
	if err := a.unreadLocked(); err != nil {
		return nil, err
	}
	if total := a.used.Add(a.reserved).Add(u); total.Over(a.quota) {
		return nil, fmt.Errorf("%w: the owner's storage holds %s; with %s more it would pass its quota of %s: delete files to make room",
			ErrQuota, describe(a.used.Add(a.reserved), false), describe(u, false), describe(a.quota, false))
	}
	a.reserved = a.reserved.Add(u)
	var once sync.Once
	return func() {
		once.Do(func() {
			a.mu.Lock()
			a.reserved = a.reserved.Add(storage.Usage{Bytes: -u.Bytes, Files: -u.Files})
			a.used = a.used.Add(u)
			a.changed++
			a.mu.Unlock()
			a.poke()
		})
	}, nil
}

// Usage is what the owner's storage held at the last measurement, plus
// what was charged and reserved since.
func (a *Account) Usage() storage.Usage {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.used.Add(a.reserved)
}

// Quota is the bound of the owner's storage.
func (a *Account) Quota() storage.Usage { return a.quota }

// admit covers workspace while a program runs on it and fails with
// ErrQuota when the owner cannot start one: a folder it cannot read, far
// more than it may hold, or the disk down to its reserve. An owner over its
// quota may still run programs, which may delete files but not add any
// (see Account.limit). done ends the cover.
func (a *Account) admit(workspace string) (done func(), err error) {
	if workspace == "" {
		return func() {}, nil
	}
	if err := checkDisk(a.hostDir(workspace), a.reserve, 0); err != nil {
		return nil, err
	}
	done = a.cover(workspace)
	a.mu.Lock()
	if len(a.watchers) == 0 && a.used.Over(a.limit) {
		a.known = false // over, with nothing running: measure it all and let programs shrink it from there
	}
	a.mu.Unlock()
	if err := a.ensureKnown(); err != nil {
		done()
		return nil, err
	}
	a.mu.Lock()
	err = a.unreadLocked()
	if err == nil && a.used.Files > maxMeasured {
		err = fmt.Errorf("%w: the workspace holds more than %d files and folders (the quota is %s): delete files from it or use a smaller folder as code storage",
			ErrQuota, maxMeasured, describe(a.quota, false))
	}
	a.mu.Unlock()
	if err != nil {
		done()
		return nil, err
	}
	return done, nil
}

// room fails when a file of size bytes would take the owner past its
// quota (see Sandbox.Room); otherwise it charges the file.
func (a *Account) room(workspace string, size int64) error {
	if err := checkDisk(a.hostDir(workspace), a.reserve, size); err != nil {
		return err
	}
	if size >= a.quota.Bytes {
		return fmt.Errorf("%w: %s is more than the workspace's whole quota of %s", ErrQuota, units.BytesSize(float64(size)), describe(a.quota, false))
	}
	done := a.cover(workspace)
	defer done()
	if err := a.ensureKnown(); err != nil {
		return err
	}
	err, dirty := a.charge(size)
	if err != nil && dirty { // a run ended since the last figure (it may have deleted files): measure, then decide
		if merr := a.measure(); merr != nil {
			return merr
		}
		err, _ = a.charge(size)
	}
	return err
}

// charge charges a file of size bytes, or says why it does not fit, and
// whether the figure it judged by predates a change (a run's end).
func (a *Account) charge(size int64) (err error, dirty bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.unreadLocked(); err != nil {
		return err, false
	}
	file := storage.Usage{Bytes: size, Files: 1}
	if now := a.used.Add(a.reserved); now.Add(file).Over(a.quota) {
		return fmt.Errorf("%w: the workspace holds %s; with %s more it would pass its quota of %s: delete files to make room",
			ErrQuota, describe(now, false), units.BytesSize(float64(size)), describe(a.quota, false)), a.changed != a.clean
	}
	a.used = a.used.Add(file)
	a.changed++
	return nil, false
}

// unreadLocked is the refusal for a folder the server cannot read.
func (a *Account) unreadLocked() error {
	if a.unread == nil {
		return nil
	}
	return fmt.Errorf("%w: the server cannot read %v in the workspace, so it counts as over the quota: make it readable or delete it", ErrQuota, a.unread)
}

// cover counts dir while it is in use (a workspace outside the account's
// folders); done ends that.
func (a *Account) cover(dir string) (done func()) {
	dir = filepath.Clean(dir)
	a.mu.Lock()
	defer a.mu.Unlock()
	if slices.ContainsFunc(a.fixed, func(f string) bool { return within(dir, f) }) {
		return func() {}
	}
	if a.extra[dir] == 0 {
		a.known = false // measured again before it is used
	}
	a.extra[dir]++
	var once sync.Once
	return func() {
		once.Do(func() {
			a.mu.Lock()
			defer a.mu.Unlock()
			if a.extra[dir]--; a.extra[dir] == 0 {
				delete(a.extra, dir)
				a.known = false
			}
		})
	}
}

func (a *Account) coveredLocked(dir string) bool {
	return slices.ContainsFunc(a.fixed, func(f string) bool { return within(filepath.Clean(dir), f) })
}

// dirsLocked lists the folders to measure.
func (a *Account) dirsLocked() []string {
	dirs := slices.Clone(a.fixed)
	for d := range a.extra {
		dirs = append(dirs, d)
	}
	return dirs
}

// anyDirLocked is a folder on the owner's disk, "" when there is none.
func (a *Account) anyDirLocked() string {
	if dirs := a.dirsLocked(); len(dirs) > 0 {
		return dirs[0]
	}
	return ""
}

// hostDir is where the disk reserve is checked for dir: the folder that
// holds the owner's filesystem, when it has one of its own.
func (a *Account) hostDir(dir string) string {
	if a.fs != nil && (dir == "" || a.coveredLocked(dir)) {
		return a.fs.HostDir()
	}
	return dir
}

// within reports whether path is dir or under it.
func within(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, dir+string(filepath.Separator))
}
