package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"golang.org/x/sync/semaphore"
)

// errClosed: the Sandbox was closed; nothing starts any more.
var errClosed = errors.New("sandbox: closed")

// sessionFor returns the live session id, starting it once if needed. The
// caller's cancellation returns at once; the start goes on for whoever asks
// next, and Close ends it.
func (s *Sandbox) sessionFor(ctx context.Context, id string, p SessionProgram) (*liveSession, error) {
	if ls := s.sess.lookup(id); ls != nil {
		return ls, nil
	}
	ch := s.sess.starts.DoChan(id, func() (any, error) { return s.startLive(id, p) })
	select {
	case r := <-ch:
		if r.Err != nil {
			return nil, r.Err
		}
		return r.Val.(*liveSession), nil
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// startLive starts session id and registers it, within the cap on sessions
// and unless the Sandbox closes meanwhile. It begins once an earlier
// session of the id has ended (its folder removed), and only then, once
// admitted, makes the session's folder: a refused start leaves nothing.
func (s *Sandbox) startLive(id string, p SessionProgram) (*liveSession, error) {
	free, err := s.sess.claim(id, nil)
	if err != nil {
		return nil, err
	}
	if !free {
		if ls := s.sess.lookup(id); ls != nil {
			return ls, nil
		}
		return nil, fmt.Errorf("session %s is starting for another call; call again", id)
	}
	if err := s.sess.reserve(id); err != nil {
		return nil, err
	}
	defer s.sess.wg.Done()
	ls, err := s.startAdmitted(id, p)
	if err != nil {
		s.sess.register(id, nil)
		return nil, err
	}
	if !s.sess.register(id, ls) {
		ls.stopWatch()
		ls.destroy(s.sess.ctx, s.log)
		ls.egress.close(s.log)
		_ = ls.outputs.remove() // Close removes the runs folder anyway
		return nil, errClosed
	}
	return ls, nil
}

// startAdmitted makes the session's folder, admits it to the quota and
// starts its container; on failure it undoes all of it.
func (s *Sandbox) startAdmitted(id string, p SessionProgram) (*liveSession, error) {
	made, err := makeWorkspace(p)
	undo := func() {
		if made {
			_ = os.RemoveAll(p.Workspace) // best effort: this start made it, empty but for what a failed make left
		}
	}
	if err != nil {
		undo()
		if NoRoom(err) {
			return nil, fmt.Errorf("%w: the session's folder could not be made, the workspace is full (no space left on device); delete files to make room", ErrQuota)
		}
		return nil, err
	}
	uncover, err := s.acct.admit(p.Workspace)
	if err != nil {
		undo()
		return nil, err
	}
	ss, err := s.startSession(s.sess.ctx, id, p)
	if err != nil {
		uncover()
		undo()
		return nil, err
	}
	// Its outputs area is under runsDir: the account counts it.
	ls := &liveSession{session: ss, turn: semaphore.NewWeighted(1), workspace: p.Workspace}
	if p.Private {
		ls.folder = p.Workspace
	}
	ls.fresh.Store(true)
	// The watch lasts as long as the session: a thread its programs leave
	// behind writes between calls too.
	stopWatch := s.acct.watch(func(why error) { s.overQuota(ls, why) })
	ls.stopWatch = func() { stopWatch(); uncover() }
	return ls, nil
}

// makeWorkspace makes p's private folder when p says how; it reports
// whether the folder is new (absent before).
func makeWorkspace(p SessionProgram) (bool, error) {
	if !p.Private || p.MakeWorkspace == nil {
		return false, nil
	}
	_, err := os.Lstat(p.Workspace)
	absent := errors.Is(err, fs.ErrNotExist)
	return absent, p.MakeWorkspace()
}

// reserve counts a start against the cap before it begins, so concurrent
// first calls with different ids cannot all pass the check, and makes Close
// wait for it.
func (r *sessions) reserve(id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		delete(r.opening, id)
		return errClosed
	}
	if n := len(r.live) + r.starting; n >= r.max {
		delete(r.opening, id)
		return fmt.Errorf("%w: %d of %d are in use; close one with close_session or wait for idle ones to expire",
			ErrSessionLimit, n, r.max)
	}
	r.starting++
	r.wg.Add(1) // under mu, before Close can wait
	return nil
}

// register ends a reservation, adding ls (nil: the start failed) to the
// registry; false means the Sandbox closed meanwhile and ls must go.
func (r *sessions) register(id string, ls *liveSession) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.starting--
	delete(r.opening, id)
	if ls == nil || r.closed {
		return false
	}
	r.live[ls.id] = ls
	return true
}

// overQuota stops session ls, whose workspace went over its quota: the
// call in flight ends with QuotaExceeded; an idle session is retired now.
func (s *Sandbox) overQuota(ls *liveSession, why error) {
	ls.halt(why)
	if ls.turn.TryAcquire(1) {
		s.sess.retire(ls, "a program took its workspace over the storage quota")
		ls.turn.Release(1)
	}
}
