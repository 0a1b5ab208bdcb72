package sandbox

import (
	"context"
	"os"
	"sync"
	"time"
)

func (ss *session) setBusy(b bool) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.busy = b
	ss.lastUsed = time.Now()
}

func (ss *session) info() SessionInfo {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return SessionInfo{ID: ss.id, Image: ss.image, Python: ss.python, Created: ss.created, LastUsed: ss.lastUsed, Busy: ss.busy}
}

// idleSince reports whether the session is idle and unused since t.
func (ss *session) idleSince(t time.Time) bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return !ss.busy && ss.lastUsed.Before(t)
}

// reap retires sessions idle for longer than the TTL and shrinks the warm
// pool, until Close.
func (s *Sandbox) reap() {
	defer s.sess.wg.Done()
	tick := time.NewTicker(min(max(s.cfg.SessionTTL/4, 100*time.Millisecond), 5*time.Second))
	defer tick.Stop()
	for {
		select {
		case <-s.sess.stop:
			return
		case now := <-tick.C:
			s.sess.expire(now.Add(-s.cfg.SessionTTL), "it was idle for longer than "+s.cfg.SessionTTL.String())
			s.pool.sweep(now)
			s.eng.RemoveStrays(s.sess.ctx) // what could not be removed while the daemon was away
			if r, ok := s.eng.(orphanReaper); ok {
				r.ReapOrphansEvery(s.sess.ctx) // the pods of replicas that are gone
			}
		}
	}
}

// expire retires, for reason, the sessions idle and unused since cutoff
// (not one running a program).
func (r *sessions) expire(cutoff time.Time, reason string) {
	for _, ls := range r.all() {
		if ls.idleSince(cutoff) && ls.turn.TryAcquire(1) {
			r.end(ls, reason, true)
			ls.turn.Release(1)
		}
	}
}

// close ends the registry: nothing starts or registers from now on, the
// starts under way are cancelled and the reaper stopped (both awaited),
// then every live session is retired for reason.
func (r *sessions) close(reason string) {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.cancel()
	close(r.stop)
	r.wg.Wait() // the reaper, and starts removing what they made
	var wg sync.WaitGroup
	for _, ls := range r.all() {
		wg.Go(func() { r.retire(ls, reason) })
	}
	wg.Wait()
}

// Close ends every session, cancels the starts under way, stops the idle
// reaper, waits for the runs and probes in flight (at most 30 s), removes
// the warm pool's containers and this instance's run output folders, and
// ends the lease (see Config.LeaseDir). Later calls fail.
func (s *Sandbox) Close() {
	s.closeOnce.Do(func() {
		s.Shutdown() // no run or probe starts from now on; those in flight end
		s.sess.close("the server stopped")
		s.drain() // the runs and probes in flight end (sessions' were just killed)
		s.pool.close()
		s.acct.close()
		if n := s.eng.RemoveStrays(context.Background()); n > 0 {
			s.log.Warn("containers could not be removed (is the Docker daemon down?); the next pybox on this state directory removes them", "count", n)
		}
		for _, dir := range []string{s.runsDir, s.staging} {
			if dir == "" {
				continue
			}
			if err := os.RemoveAll(dir); err != nil {
				s.log.Warn("run output or staging folders not removed", "dir", dir, "err", err)
			}
		}
		s.releaseLease()
	})
}
