package sandbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"
	"golang.org/x/sync/singleflight"

	"github.com/pybox-dev/pybox/internal/engine"
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

// sessions is the registry of live sessions: which session each id names,
// why ended ones ended, the cap on live ones, and the starts under way.
type sessions struct {
	max  int // live sessions and starts at once
	log  *slog.Logger
	mu   sync.Mutex
	live map[string]*liveSession
	// One id is at most one of: opening (a start under way), live, or
	// ending (its container and folder being removed). A start waits for
	// the end of the id before it begins, so no session ever works in a
	// folder an earlier one's end is removing.
	opening  map[string]bool
	ending   map[string]chan struct{} // closed once that end is complete
	ended    map[string]string        // why a session of that id ended (bounded)
	starting int                      // starts under way, counted against MaxSessions
	closed   bool                     // Close ran: nothing starts any more
	starts   singleflight.Group
	ctx      context.Context // ends with Close, and with it every start
	cancel   context.CancelFunc
	stop     chan struct{}
	wg       sync.WaitGroup // the reaper and every start
}

// liveSession pairs a session with the token that serialises its programs.
type liveSession struct {
	*session
	turn      *semaphore.Weighted
	fresh     atomic.Bool // no call has run in it yet
	stopWatch func()      // ends the watch on its workspace's quota
	folder    string      // its private workspace, removed when it is closed or expires; "" = none
	workspace string      // its /workspace on the host (private or shared); "" = none
}

const maxEndedNotes = 1024

func newSessions(max int, log *slog.Logger) *sessions {
	r := &sessions{max: max, log: log, live: map[string]*liveSession{}, opening: map[string]bool{}, ending: map[string]chan struct{}{},
		ended: map[string]string{}, stop: make(chan struct{})}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	return r
}

// maxTurnTries bounds how often one call finds its session ended (expired,
// closed, dead or on another image) while it waited, and starts again.
const maxTurnTries = 3

// RunInSession runs p in the session id, starting the session first if it
// does not exist. A timeout, crash or cancellation kills the session's
// container; the result then has SessionLost set and the next call with
// that id gets a fresh session.
func (s *Sandbox) RunInSession(ctx context.Context, id string, p SessionProgram) (Result, error) {
	if err := ValidSessionID(id); err != nil {
		return Result{}, err
	}
	ctx, stop := s.bound(ctx)
	defer stop()
	ls, err := s.takeTurn(ctx, id, p)
	if err != nil {
		return Result{}, err
	}
	defer ls.turn.Release(1)
	if err := s.acquire(ctx); err != nil {
		return Result{}, err
	}
	defer s.slots.Release(1)
	// The first call to run reports the session as new, not every call that
	// waited for its start. It takes the note on the previous session
	// before running: if this run loses the session, its note is the next
	// call's.
	note := ""
	fresh := ls.fresh.Swap(false)
	if fresh {
		note = s.sess.takeEndedNote(id)
	}
	if err := prepare(p.Prepare); err != nil {
		return Result{NewSession: fresh, SessionNote: note}, err
	}
	res, err := s.runTurn(ctx, ls, p)
	res.NewSession, res.SessionNote = fresh, note
	return res, err
}

// takeTurn returns the session id with its turn held, starting it when
// needed, and again when it ended while this call waited for its turn.
func (s *Sandbox) takeTurn(ctx context.Context, id string, p SessionProgram) (*liveSession, error) {
	for range maxTurnTries {
		ls, err := s.sessionFor(ctx, id, p)
		if err != nil {
			return nil, err
		}
		if err := ls.turn.Acquire(ctx, 1); err != nil {
			return nil, context.Cause(ctx)
		}
		if s.sess.usable(ls, p) {
			return ls, nil
		}
		ls.turn.Release(1)
	}
	return nil, fmt.Errorf("session %s kept ending while this call waited; call again", id)
}

// usable reports whether ls, whose turn the caller holds, can run p. It
// retires ls when its kernel died since the last call or when p must follow
// a new image; holding the turn, that kills nobody's program.
func (r *sessions) usable(ls *liveSession, p SessionProgram) bool {
	if !r.current(ls) { // expired or closed while this call waited
		return false
	}
	if x, ok := ls.exited(); ok {
		r.retire(ls, exitReason(x))
		return false
	}
	if p.FollowImage && ls.image != p.Image {
		r.retire(ls, "the environment changed (packages were installed or it was reconfigured), so it restarted on the new one")
		return false
	}
	return true
}

// runTurn runs one program in ls and retires the session if it was lost.
func (s *Sandbox) runTurn(ctx context.Context, ls *liveSession, p SessionProgram) (Result, error) {
	if !s.sess.current(ls) { // closed while this call waited for a slot
		return Result{SessionLost: true}, fmt.Errorf("session %s ended while this call waited; call again for a new one", ls.id)
	}
	ls.setBusy(true)
	outputs := s.beginTurnOutputs(ls)
	stdout := &capBuffer{max: s.cfg.Limits.OutputBytes, onWrite: streamHook(p.OnOutput, "stdout")}
	stderr := &capBuffer{max: s.cfg.Limits.OutputBytes, onWrite: streamHook(p.OnOutput, "stderr")}
	res, lost, err := ls.run(ctx, s.log, p, outputs, orDefault(p.Timeout, s.cfg.Limits.Timeout), runnerCap(s.cfg.Limits), stdout, stderr)
	ls.setBusy(false)
	res.Outputs, res.OutputsNote = s.endTurnOutputs(ls, outputs)
	s.acct.handOver(res.Outputs)
	var tout, terr bool
	res.Stdout, tout = stdout.result()
	res.Stderr, terr = stderr.result()
	res.Truncated = tout || terr || res.DroppedBytes > 0
	ls.egress.turnInto(&res)
	if err == nil && !res.QuotaExceeded && ls.workspace != "" {
		// As a stateless run: on the owner's own filesystem a turn
		// whose writes the kernel refused at the quota (ENOSPC) ends
		// by itself, and the client is told why.
		if why := s.acct.fullNow(); why != nil {
			res.QuotaExceeded, res.QuotaNote = true, why.Error()
		}
	}
	if lost != nil {
		res.SessionLost = true
		s.sess.retire(ls, lostReason(res, lost, err))
	}
	return res, err
}

func lostReason(res Result, lost, err error) string {
	switch {
	case res.TimedOut:
		return fmt.Sprintf("a program timed out after %s", res.Timeout)
	case res.OOMKilled:
		return "a program ran out of memory"
	case res.ResourceKilled:
		return "a program exceeded the sandbox's resource limits (too many processes)"
	case errors.Is(lost, ErrDaemonLost):
		return "the connection to the Docker daemon broke (was it restarted?)"
	case errors.Is(lost, ErrQuota):
		return "a program took its workspace over the storage quota"
	case errors.Is(lost, errAborted):
		return "a program wrote into its runner's control pipe"
	case errors.Is(lost, errFraming):
		return "the session's runner broke its protocol"
	case err != nil:
		return "a call was cancelled"
	}
	return exitReason(engine.Exit{Code: res.ExitCode})
}

// exitReason says how a kernel that ended on its own ended.
func exitReason(x engine.Exit) string {
	if x.OOMKilled {
		return "its Python process ran out of memory"
	}
	return fmt.Sprintf("its Python process exited (status %d)", x.Code)
}

// all returns the live sessions.
func (r *sessions) all() []*liveSession {
	r.mu.Lock()
	defer r.mu.Unlock()
	list := make([]*liveSession, 0, len(r.live))
	for _, ls := range r.live {
		list = append(list, ls)
	}
	return list
}

func (r *sessions) lookup(id string) *liveSession {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.live[id]
}

func (r *sessions) current(ls *liveSession) bool { return r.lookup(ls.id) == ls }

// retire removes ls from the registry, destroys it and remembers why,
// keeping its folder (the next session of the id works in it).
func (r *sessions) retire(ls *liveSession, reason string) { r.end(ls, reason, false) }

// end removes ls from the registry, destroys it, removes its folder when
// drop, and remembers why; it reports whether this call ended it. Only the
// first reason counts: a program killed by CloseSession must not turn "it
// was closed" into "exited (status 137)", nor note a later session of the
// same id as ended. Until all of it is done the id is ending: no session of
// it starts.
func (r *sessions) end(ls *liveSession, reason string, drop bool) bool {
	r.mu.Lock()
	first := r.live[ls.id] == ls
	done := make(chan struct{})
	if first {
		delete(r.live, ls.id)
		if len(r.ended) >= maxEndedNotes {
			clear(r.ended)
		}
		r.ended[ls.id] = reason
		r.ending[ls.id] = done
	}
	r.mu.Unlock()
	ls.stopWatch()
	ls.destroy(context.Background(), r.log)
	ls.egress.close(r.log)
	if err := ls.outputs.remove(); err != nil {
		r.log.Warn("session output area not removed", "session_id", ls.id, "err", err)
	}
	if !first {
		return false
	}
	if drop {
		ls.removeFolder(r.log)
	}
	r.finish(ls.id, done)
	r.log.Info("session ended", "session_id", ls.id, "reason", reason)
	return true
}

// finish ends the id's ending: starts of it may go on.
func (r *sessions) finish(id string, done chan struct{}) {
	r.mu.Lock()
	delete(r.ending, id)
	r.mu.Unlock()
	close(done)
}

// claim marks id as opening (or, with end, as ending until end is
// closed), once no session of it is live, opening or ending: it waits for
// an end. false means one is live or opening.
func (r *sessions) claim(id string, end chan struct{}) (bool, error) {
	for {
		r.mu.Lock()
		done, ending := r.ending[id]
		if !ending {
			free := r.live[id] == nil && !r.opening[id]
			switch {
			case free && end != nil:
				r.ending[id] = end
			case free:
				r.opening[id] = true
			}
			r.mu.Unlock()
			return free, nil
		}
		r.mu.Unlock()
		select {
		case <-done:
		case <-r.ctx.Done():
			return false, errClosed
		}
	}
}

// WhileEnded runs f, which may remove what an ended session of id left
// (its folder), while no session of id is live, starting or ending, and
// none can start; it reports false, without running f, when one is live
// or starting. A call for id that comes meanwhile waits for f.
func (s *Sandbox) WhileEnded(id string, f func()) bool {
	done := make(chan struct{})
	if ok, err := s.sess.claim(id, done); !ok || err != nil {
		return false
	}
	defer s.sess.finish(id, done)
	f()
	return true
}

func (r *sessions) takeEndedNote(id string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	reason, ok := r.ended[id]
	if !ok {
		return ""
	}
	delete(r.ended, id)
	return fmt.Sprintf("the previous session %q ended (%s), so its variables are gone; this is a new session", id, reason)
}

// Sessions lists the live sessions, oldest first.
func (s *Sandbox) Sessions() []SessionInfo { return s.sess.list() }

// list returns the live sessions' descriptions, oldest first.
func (r *sessions) list() []SessionInfo {
	list := r.all()
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
	ls := s.sess.lookup(id)
	if ls == nil || !s.sess.end(ls, "it was closed", true) {
		return fmt.Errorf("%w: %q", ErrNoSession, id)
	}
	return nil
}

// removeFolder deletes the session's private workspace, once its container
// is gone (RemoveAll does not follow the symlinks its programs left).
func (ls *liveSession) removeFolder(log *slog.Logger) {
	if ls.folder == "" {
		return
	}
	if err := os.RemoveAll(ls.folder); err != nil {
		log.Warn("session folder not removed; it still counts against the storage quota", "session_id", ls.id, "err", err)
	}
}
