package sandbox

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"
	"golang.org/x/sync/singleflight"
)

// Session errors callers branch on.
var (
	ErrBadSessionID = errors.New("invalid session_id: use 1-64 letters, digits, '_' or '-'")
	ErrNoSession    = errors.New("no such session")
	ErrSessionLimit = errors.New("too many live sessions")
)

var sessionID = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// ValidSessionID reports whether id is acceptable.
func ValidSessionID(id string) error {
	if !sessionID.MatchString(id) {
		return ErrBadSessionID
	}
	return nil
}

// SessionInfo describes a live session.
type SessionInfo struct {
	ID       string
	Image    string
	Python   []string
	Created  time.Time
	LastUsed time.Time
	Busy     bool
}

// sessions is the registry of live sessions.
type sessions struct {
	mu     sync.Mutex
	live   map[string]*liveSession
	ended  map[string]string // why a session of that id ended (bounded)
	starts singleflight.Group
	stop   chan struct{}
	wg     sync.WaitGroup
}

// liveSession pairs a session with the token that serialises its programs.
type liveSession struct {
	*session
	turn *semaphore.Weighted
}

const maxEndedNotes = 1024

// RunInSession runs p in the session id, starting the session first if it
// does not exist. A timeout, crash or cancellation kills the session's
// container; the result then has SessionLost set and the next call with
// that id gets a fresh session.
func (s *Sandbox) RunInSession(ctx context.Context, id string, p SessionProgram) (Result, error) {
	if err := ValidSessionID(id); err != nil {
		return Result{}, err
	}
	if ls := s.lookup(id); ls != nil && p.FollowImage && ls.image != p.Image {
		s.retire(ls, "the environment changed (packages were installed or it was reconfigured), so it restarted on the new one")
	}
	ls, fresh, err := s.sessionFor(ctx, id, p)
	if err != nil {
		return Result{}, err
	}
	if err := ls.turn.Acquire(ctx, 1); err != nil {
		return Result{}, context.Cause(ctx)
	}
	defer ls.turn.Release(1)
	if err := s.acquire(ctx); err != nil {
		return Result{}, err
	}
	defer s.slots.Release(1)
	res, err := s.runTurn(ctx, ls, p)
	res.NewSession = fresh
	if fresh {
		res.SessionNote = s.takeEndedNote(id)
	}
	return res, err
}

// runTurn runs one program in ls and retires the session if it was lost.
func (s *Sandbox) runTurn(ctx context.Context, ls *liveSession, p SessionProgram) (Result, error) {
	if !s.current(ls) { // expired or closed while we queued
		return Result{SessionLost: true}, fmt.Errorf("session %s ended while this call waited; call again for a new one", ls.id)
	}
	ls.setBusy(true)
	stdout := &capBuffer{max: s.cfg.Limits.OutputBytes, onWrite: streamHook(p.OnOutput, "stdout")}
	stderr := &capBuffer{max: s.cfg.Limits.OutputBytes, onWrite: streamHook(p.OnOutput, "stderr")}
	res, lost, err := ls.run(ctx, s.log, p, orDefault(p.Timeout, s.cfg.Limits.Timeout), stdout, stderr)
	ls.setBusy(false)
	var tout, terr bool
	res.Stdout, tout = stdout.result()
	res.Stderr, terr = stderr.result()
	res.Truncated = tout || terr
	if lost {
		res.SessionLost = true
		s.retire(ls, lostReason(res, err))
	}
	return res, err
}

func lostReason(res Result, err error) string {
	switch {
	case res.TimedOut:
		return fmt.Sprintf("a program timed out after %s", res.Timeout)
	case res.OOMKilled:
		return "a program ran out of memory"
	case err != nil:
		return "a call was cancelled"
	}
	return fmt.Sprintf("its Python process exited (status %d)", res.ExitCode)
}

// sessionFor returns the live session id, starting it once if needed.
func (s *Sandbox) sessionFor(ctx context.Context, id string, p SessionProgram) (*liveSession, bool, error) {
	if ls := s.lookup(id); ls != nil {
		return ls, false, nil
	}
	v, err, _ := s.sess.starts.Do(id, func() (any, error) {
		if ls := s.lookup(id); ls != nil {
			return ls, nil
		}
		if n := s.liveCount(); n >= s.cfg.MaxSessions {
			return nil, fmt.Errorf("%w: %d of %d are in use; close one with close_session or wait for idle ones to expire",
				ErrSessionLimit, n, s.cfg.MaxSessions)
		}
		ss, err := s.startSession(context.WithoutCancel(ctx), id, p)
		if err != nil {
			return nil, err
		}
		ls := &liveSession{session: ss, turn: semaphore.NewWeighted(1)}
		s.sess.mu.Lock()
		s.sess.live[id] = ls
		s.sess.mu.Unlock()
		return ls, nil
	})
	if err != nil {
		return nil, false, err
	}
	return v.(*liveSession), true, nil
}

func (s *Sandbox) lookup(id string) *liveSession {
	s.sess.mu.Lock()
	defer s.sess.mu.Unlock()
	return s.sess.live[id]
}

func (s *Sandbox) current(ls *liveSession) bool { return s.lookup(ls.id) == ls }

func (s *Sandbox) liveCount() int {
	s.sess.mu.Lock()
	defer s.sess.mu.Unlock()
	return len(s.sess.live)
}

// retire removes ls from the registry, destroys it and remembers why.
func (s *Sandbox) retire(ls *liveSession, reason string) {
	s.sess.mu.Lock()
	if s.sess.live[ls.id] == ls {
		delete(s.sess.live, ls.id)
	}
	if len(s.sess.ended) >= maxEndedNotes {
		clear(s.sess.ended)
	}
	s.sess.ended[ls.id] = reason
	s.sess.mu.Unlock()
	ls.destroy(context.Background(), s.log)
	s.log.Info("session ended", "session_id", ls.id, "reason", reason)
}

func (s *Sandbox) takeEndedNote(id string) string {
	s.sess.mu.Lock()
	defer s.sess.mu.Unlock()
	reason, ok := s.sess.ended[id]
	if !ok {
		return ""
	}
	delete(s.sess.ended, id)
	return fmt.Sprintf("the previous session %q ended (%s), so its variables are gone; this is a new session", id, reason)
}

// Sessions lists the live sessions, oldest first.
func (s *Sandbox) Sessions() []SessionInfo {
	s.sess.mu.Lock()
	list := make([]*liveSession, 0, len(s.sess.live))
	for _, ls := range s.sess.live {
		list = append(list, ls)
	}
	s.sess.mu.Unlock()
	out := make([]SessionInfo, 0, len(list))
	for _, ls := range list {
		out = append(out, ls.info())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	return out
}

// CloseSession ends the session id and removes its container.
func (s *Sandbox) CloseSession(ctx context.Context, id string) error {
	if err := ValidSessionID(id); err != nil {
		return err
	}
	ls := s.lookup(id)
	if ls == nil {
		return fmt.Errorf("%w: %q", ErrNoSession, id)
	}
	s.retire(ls, "it was closed")
	return nil
}
