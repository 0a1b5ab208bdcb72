package sandbox

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/semaphore"
)

// The session registry's state machine, without Docker (in addition to
// the real-Docker session tests in session_test.go, never instead).

func stubSession(id string, lastUsed time.Time) (*liveSession, *stubAttachment) {
	a := &stubAttachment{id: "stub-" + id, done: make(chan struct{})}
	ss := &session{conn: &conn{k: a, halted: make(chan struct{})}, id: id, image: "img", created: lastUsed, lastUsed: lastUsed}
	ls := &liveSession{session: ss, turn: semaphore.NewWeighted(1), stopWatch: func() {}}
	return ls, a
}

func startStub(t *testing.T, r *sessions, id string, lastUsed time.Time) (*liveSession, *stubAttachment) {
	t.Helper()
	if err := r.reserve(id); err != nil {
		t.Fatalf("reserve %s: %v", id, err)
	}
	ls, a := stubSession(id, lastUsed)
	ok := r.register(id, ls)
	r.wg.Done() // as startLive does when its start ends
	if !ok {
		t.Fatalf("register %s refused", id)
	}
	return ls, a
}

// TestSessionsUnitCapCountsStarts: starts under way count against the cap,
// so concurrent first calls cannot pass it together; a failed start frees
// its place.
func TestSessionsUnitCapCountsStarts(t *testing.T) {
	r := newSessions(2, slog.New(slog.DiscardHandler))
	defer r.close("test over")
	if err := r.reserve("x"); err != nil {
		t.Fatal(err)
	}
	if err := r.reserve("x"); err != nil {
		t.Fatal(err)
	}
	if err := r.reserve("x"); !errors.Is(err, ErrSessionLimit) {
		t.Fatalf("a third start with two under way: %v; want ErrSessionLimit", err)
	}
	r.register("x", nil) // one start failed
	r.wg.Done()
	if err := r.reserve("x"); err != nil {
		t.Fatalf("after a failed start: %v; want its place free", err)
	}
	r.register("x", nil)
	r.wg.Done()
	r.register("x", nil)
	r.wg.Done()
}

// TestSessionsUnitRetireFirstReasonCounts: only the first retirement of a
// session is noted; a later session of the same id is not retired by a
// stale handle; the note is given once.
func TestSessionsUnitRetireFirstReasonCounts(t *testing.T) {
	r := newSessions(4, slog.New(slog.DiscardHandler))
	defer r.close("test over")
	old, a := startStub(t, r, "s1", time.Now())
	r.retire(old, "it was closed")
	r.retire(old, "its Python process exited (status 137)")
	if !a.destroyed.Load() {
		t.Error("a retired session's container was not destroyed")
	}
	if r.lookup("s1") != nil {
		t.Error("a retired session is still registered")
	}
	fresh, _ := startStub(t, r, "s1", time.Now())
	r.retire(old, "a stale handle") // must not touch the new session
	if r.lookup("s1") != fresh {
		t.Fatal("a stale handle retired the newer session of the same id")
	}
	note := r.takeEndedNote("s1")
	if !strings.Contains(note, "it was closed") || strings.Contains(note, "137") || strings.Contains(note, "stale") {
		t.Errorf("note %q; want the first reason only", note)
	}
	if again := r.takeEndedNote("s1"); again != "" {
		t.Errorf("the note was given twice: %q", again)
	}
}

// TestSessionsUnitExpireSkipsBusy: expiry retires idle sessions, never one
// whose turn is held (a program running) nor one used since the cutoff.
func TestSessionsUnitExpireSkipsBusy(t *testing.T) {
	r := newSessions(4, slog.New(slog.DiscardHandler))
	defer r.close("test over")
	long := time.Now().Add(-time.Hour)
	idle, _ := startStub(t, r, "idle", long)
	running, _ := startStub(t, r, "running", long)
	recent, _ := startStub(t, r, "recent", time.Now())
	running.turn.Acquire(context.Background(), 1)
	r.expire(time.Now().Add(-time.Minute), "it was idle")
	if r.lookup("idle") == idle {
		t.Error("an idle session outlived its expiry")
	}
	if r.lookup("running") != running {
		t.Error("a session running a program was expired")
	}
	if r.lookup("recent") != recent {
		t.Error("a session used since the cutoff was expired")
	}
	running.turn.Release(1)
	if got := len(r.list()); got != 2 {
		t.Errorf("%d sessions listed; want 2", got)
	}
}

// TestSessionsUnitCloseEndsEverything: close retires every live session,
// and afterwards nothing reserves or registers.
func TestSessionsUnitCloseEndsEverything(t *testing.T) {
	r := newSessions(4, slog.New(slog.DiscardHandler))
	_, a1 := startStub(t, r, "a", time.Now())
	_, a2 := startStub(t, r, "b", time.Now())
	if err := r.reserve("x"); err != nil { // a start under way when close begins
		t.Fatal(err)
	}
	closed := make(chan struct{})
	go func() { r.close("the server stopped"); close(closed) }()
	select {
	case <-closed:
		t.Fatal("close returned with a start under way")
	case <-time.After(100 * time.Millisecond):
	}
	late, la := stubSession("c", time.Now())
	if r.register("c", late) {
		t.Error("a start that ended during close was registered")
	}
	r.wg.Done()
	<-closed
	if !a1.destroyed.Load() || !a2.destroyed.Load() {
		t.Error("close left a live session's container")
	}
	if la.destroyed.Load() {
		t.Error("the registry destroyed a start's container it never registered (the start does that)")
	}
	if err := r.reserve("x"); !errors.Is(err, errClosed) {
		t.Errorf("reserve after close: %v; want errClosed", err)
	}
	if n := len(r.list()); n != 0 {
		t.Errorf("%d sessions after close", n)
	}
}
