package sandbox

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pybox-dev/pybox/internal/engine"
)

// The pool's state machine, without Docker: its containers come from a
// start function the test controls (in addition to the real-Docker pool
// tests in pool_test.go, never instead).

// stubAttachment is a container that is only ever started and destroyed.
type stubAttachment struct {
	id        string
	done      chan struct{}
	destroyed atomic.Bool
	once      sync.Once
}

func (a *stubAttachment) ContainerID() string         { return a.id }
func (a *stubAttachment) Output() io.Reader           { return eofReader{} }
func (a *stubAttachment) Write(p []byte) (int, error) { return len(p), nil }
func (a *stubAttachment) Broken() bool                { return false }
func (a *stubAttachment) Done() <-chan struct{}       { return a.done }
func (a *stubAttachment) Exit() engine.Exit           { return engine.Exit{Code: 137} }
func (a *stubAttachment) Destroy(context.Context) error {
	a.destroyed.Store(true)
	a.once.Do(func() { close(a.done) })
	return nil
}

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

// starter hands out stub containers, optionally held until release, and
// records how many starts ran at once.
type starter struct {
	mu       sync.Mutex
	made     []*stubAttachment
	inFlight int
	most     int
	gate     chan struct{} // non-nil: each start waits for a value on it, or its close
	fail     atomic.Bool
	stops    bool // a start waiting for gate ends with its context (as a real one does)
}

func (s *starter) start(ctx context.Context, p Program) (*warm, error) {
	s.mu.Lock()
	s.inFlight++
	s.most = max(s.most, s.inFlight)
	s.mu.Unlock()
	var stopped error
	if s.gate != nil && s.stops {
		select {
		case <-s.gate:
		case <-ctx.Done():
			stopped = ctx.Err()
		}
	} else if s.gate != nil {
		<-s.gate
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inFlight--
	if stopped != nil {
		return nil, stopped
	}
	if s.fail.Load() {
		return nil, errors.New("stub: start failed")
	}
	a := &stubAttachment{id: "stub", done: make(chan struct{})}
	s.made = append(s.made, a)
	return &warm{conn: &conn{k: a, halted: make(chan struct{})}, started: time.Now()}, nil
}

func (s *starter) counts() (made, destroyed int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range s.made {
		if a.destroyed.Load() {
			destroyed++
		}
	}
	return len(s.made), destroyed
}

func stubPool(t *testing.T, floor, ceiling int, st *starter) *pool {
	t.Helper()
	pl := newPool(floor, ceiling, st.start, slog.New(slog.DiscardHandler))
	pl.loneDelay = 0 // the first run refills at once (TestPoolUnitFirstRunRefillsLater: the delay)
	t.Cleanup(func() {
		if st.gate != nil {
			close(st.gate)
		}
		pl.close()
	})
	return pl
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 10s: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

var stubProgram = Program{Image: "img", Workspace: "/ws"}

// settled waits until nothing the pool started is under way: its fills,
// the fills and removals those start, and so on (they all run in pl.wg).
// Nothing the test does meanwhile may start more.
func settled(pl *pool) { pl.wg.Wait() }

// fillsNow is how many starts the pool has under way.
func fillsNow(pl *pool) int {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	return pl.fills()
}

// TestPoolUnitRefillAfterRun: nothing is started before the first run; a
// run takes nothing from an empty pool, and its end refills the key to its
// target, at most maxFills starts at a time; the next run gets a ready one.
func TestPoolUnitRefillAfterRun(t *testing.T) {
	st := &starter{}
	pl := stubPool(t, 2, 4, st)
	if w := pl.take(context.Background(), stubProgram); w != nil {
		t.Fatal("an empty pool handed out a container")
	}
	if made, _ := st.counts(); made != 0 {
		t.Fatalf("%d containers started before any run ended; want 0 (refills follow runs)", made)
	}
	pl.done(stubProgram, false)
	// One run in the window: the target is the floor, 2.
	eventually(t, "two ready containers", func() bool { return pl.ready() == 2 })
	settled(pl)
	if made, _ := st.counts(); made != 2 {
		t.Errorf("%d containers started for a target of 2", made)
	}
	if st.most > maxFills {
		t.Errorf("%d starts at once; the most is %d", st.most, maxFills)
	}
	w := pl.take(context.Background(), stubProgram)
	if w == nil {
		t.Fatal("a ready container was not handed out")
	}
	if pl.ready() != 1 {
		t.Errorf("%d ready after a take; want 1", pl.ready())
	}
	pl.dropLater(w)
	pl.done(stubProgram, true)
	// Two runs in the window: the target stays 2 (floor) .. it may grow to
	// 2 recent starts; never past the ceiling.
	eventually(t, "the pool refilled", func() bool { return pl.ready() >= 2 })
	if n := pl.ready(); n > 4 {
		t.Errorf("%d ready; the ceiling is 4", n)
	}
}

// takeDuringAFill has a run counted as demand, its refill start (held at
// st's gate), and another run take a container while that start is under
// way; it returns that run's result once the run waits for the start.
func takeDuringAFill(t *testing.T, pl *pool) <-chan *warm {
	t.Helper()
	pl.take(context.Background(), stubProgram) // an empty pool: counted as demand
	pl.done(stubProgram, false)                // starts one fill, held at the gate
	eventually(t, "a fill under way", func() bool { return fillsNow(pl) == 1 })
	got := make(chan *warm, 1)
	go func() { got <- pl.take(context.Background(), stubProgram) }()
	eventually(t, "the run waits for the fill", func() bool {
		pl.mu.Lock()
		defer pl.mu.Unlock()
		return pl.waiting[poolKey(stubProgram)] == 1
	})
	return got
}

// TestPoolUnitTakeJoinsAFill: with nothing ready but a start under way, a
// run waits for that start (up to its joinWait) instead of going cold.
func TestPoolUnitTakeJoinsAFill(t *testing.T) {
	st := &starter{gate: make(chan struct{})}
	pl := stubPool(t, 1, 1, st)
	got := takeDuringAFill(t, pl)
	st.gate <- struct{}{} // the fill ends
	select {
	case w := <-got:
		if w == nil {
			t.Fatal("the run went cold although a fill ended while it waited")
		}
		pl.dropLater(w)
	case <-time.After(pl.joinWait + 5*time.Second):
		t.Fatal("take did not return")
	}
}

// TestPoolUnitTakeWaitsForASlowFill: on a loaded machine a container
// takes seconds to start; a run that finds one under way for it still
// waits for that one rather than start another beside it, which would
// only load the machine more (and leave the pool's surplus to be
// removed unused: 203 containers for 72 calls in a suite bound by CPU).
func TestPoolUnitTakeWaitsForASlowFill(t *testing.T) {
	t.Parallel() // its sandbox, folders and servers are its own; the package ends with these, two at a time
	st := &starter{gate: make(chan struct{})}
	pl := stubPool(t, 1, 1, st)
	got := takeDuringAFill(t, pl)
	time.Sleep(3 * time.Second) // the slow start: longer than the old bound (1 s)
	st.gate <- struct{}{}
	if w := <-got; w == nil {
		t.Fatal("the run went cold while a container was being started for it")
	} else {
		pl.dropLater(w)
	}
}

// TestPoolUnitTakeGivesUpAfterJoinWait: a fill that does not end in time
// leaves the run to the cold path after the pool's joinWait, not later.
func TestPoolUnitTakeGivesUpAfterJoinWait(t *testing.T) {
	st := &starter{gate: make(chan struct{})}
	pl := stubPool(t, 1, 1, st)
	pl.joinWait = time.Second
	pl.take(context.Background(), stubProgram)
	pl.done(stubProgram, false)
	eventually(t, "a fill under way", func() bool { return fillsNow(pl) == 1 })
	start := time.Now()
	if w := pl.take(context.Background(), stubProgram); w != nil {
		t.Fatal("take returned a container no fill had made")
	}
	if waited := time.Since(start); waited < pl.joinWait/2 || waited > pl.joinWait+5*time.Second {
		t.Errorf("take waited %v for a stuck fill; want about %v", waited, pl.joinWait)
	}
}

// TestPoolUnitCloseDuringFills: containers whose start ends after close
// are destroyed, not pooled, and close waits for them.
func TestPoolUnitCloseDuringFills(t *testing.T) {
	st := &starter{gate: make(chan struct{})}
	pl := newPool(2, 2, st.start, slog.New(slog.DiscardHandler))
	closed := closeDuringTwoFills(t, pl, st)
	select {
	case <-closed:
		t.Fatal("close returned while two starts were under way")
	case <-time.After(100 * time.Millisecond):
	}
	close(st.gate)
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("close did not return after the starts ended")
	}
	made, destroyed := st.counts()
	if made != 2 || destroyed != 2 {
		t.Errorf("%d started, %d destroyed after close; want 2 and 2", made, destroyed)
	}
	if pl.ready() != 0 {
		t.Errorf("%d ready after close", pl.ready())
	}
	pl.done(stubProgram, false)
	settled(pl)
	if made, _ := st.counts(); made != 2 {
		t.Errorf("a run ending after close started %d more containers", made-2)
	}
}

// closeDuringTwoFills has pl (floor 2) run once, so that two fills start,
// then closes it in the background once both are under way; the channel
// is closed when close returns.
func closeDuringTwoFills(t *testing.T, pl *pool, st *starter) <-chan struct{} {
	t.Helper()
	pl.take(context.Background(), stubProgram)
	pl.done(stubProgram, false)
	eventually(t, "two fills under way", func() bool {
		st.mu.Lock()
		defer st.mu.Unlock()
		return st.inFlight == 2
	})
	closed := make(chan struct{})
	go func() { pl.close(); close(closed) }()
	return closed
}

// TestPoolUnitCloseStopsFills: close ends the starts under way through
// their context (a server that ends right after its last run does not
// start the refills of that run to remove them) and returns without
// waiting for them to finish; nothing is pooled or left.
func TestPoolUnitCloseStopsFills(t *testing.T) {
	st := &starter{gate: make(chan struct{}), stops: true}
	pl := stubPool(t, 2, 2, st)
	closed := closeDuringTwoFills(t, pl, st)
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("close waited for starts it could stop")
	}
	if made, _ := st.counts(); made != 0 || pl.ready() != 0 {
		t.Errorf("%d started, %d ready after close; want none", made, pl.ready())
	}
}

// TestPoolUnitFailedStartStopsTheChain: a start that fails ends that
// key's refill (no retry storm against a daemon that refuses); the next
// run's end tries again.
func TestPoolUnitFailedStartStopsTheChain(t *testing.T) {
	st := &starter{}
	st.fail.Store(true)
	pl := stubPool(t, 2, 2, st)
	pl.take(context.Background(), stubProgram)
	pl.done(stubProgram, false)
	eventually(t, "the fills ended", func() bool { return fillsNow(pl) == 0 })
	st.fail.Store(false) // a retry now would succeed
	settled(pl)
	if pl.ready() != 0 {
		t.Fatalf("%d ready although every start failed", pl.ready())
	}
	pl.take(context.Background(), stubProgram)
	pl.done(stubProgram, false)
	eventually(t, "the pool filled once starts work again", func() bool { return pl.ready() == 2 })
}

// TestPoolUnitOldKeysDrained: only the poolKeys most recent environments
// are kept warm; a newer one drains the oldest's containers.
func TestPoolUnitOldKeysDrained(t *testing.T) {
	st := &starter{}
	pl := stubPool(t, 1, 1, st)
	progs := []Program{{Image: "a", Workspace: "/ws"}, {Image: "b", Workspace: "/ws"}, {Image: "c", Workspace: "/ws"}}
	for _, p := range progs[:poolKeys] {
		pl.take(context.Background(), p) // nothing ready: counted as demand
		pl.done(p, false)
	}
	eventually(t, "one ready per key", func() bool { return pl.ready() == poolKeys })
	pl.take(context.Background(), progs[poolKeys])
	eventually(t, "the oldest key's container destroyed", func() bool {
		_, destroyed := st.counts()
		return destroyed == 1
	})
	pl.mu.Lock()
	_, kept := pl.idle[poolKey(progs[0])]
	pl.mu.Unlock()
	if kept {
		t.Error("the oldest environment is still kept warm")
	}
}

// TestPoolUnitUpcomingBoundsFills: told how many runs are still to come,
// the pool starts no container past them (one started and never used
// costs as much as a run); told "unknown" again, it follows demand.
func TestPoolUnitUpcomingBoundsFills(t *testing.T) {
	st := &starter{}
	pl := stubPool(t, 4, 8, st)
	pl.setUpcoming(1)
	pl.take(context.Background(), stubProgram)
	pl.done(stubProgram, false) // the target is 4; one run is still to come
	eventually(t, "one ready container", func() bool { return pl.ready() == 1 })
	pl.setUpcoming(0)
	w := pl.take(context.Background(), stubProgram)
	if w == nil {
		t.Fatal("the ready container was not handed out")
	}
	pl.dropLater(w)
	pl.done(stubProgram, true) // nothing is to come: no refill
	pl.mu.Lock()
	fills := pl.fills()
	pl.mu.Unlock()
	if made, _ := st.counts(); made != 1 || fills != 0 || pl.ready() != 0 {
		t.Errorf("%d started, %d starting, %d ready with no run to come; want 1, 0, 0", made, fills, pl.ready())
	}
	pl.setUpcoming(-1)
	pl.take(context.Background(), stubProgram)
	pl.done(stubProgram, false)
	eventually(t, "the floor, refilled once the count is unknown", func() bool { return pl.ready() == 4 })
}

// TestPoolUnitAnyRunnerStart: a warm container whose runner started from
// source serves a program whose runner would start compiled ahead (and
// the other way round): the same runner runs either way, so pybox eval's
// first samples, started before its compiled runner is there, leave no
// container unused.
func TestPoolUnitAnyRunnerStart(t *testing.T) {
	st := &starter{}
	pl := stubPool(t, 1, 1, st)
	src := Program{Image: "a", Workspace: "/ws"}
	compiled := src
	compiled.Runner = []byte("M8\ncompiled")
	pl.take(context.Background(), src) // nothing ready: counted as demand
	pl.done(src, false)
	eventually(t, "one ready container", func() bool { return pl.ready() == 1 })
	w := pl.take(context.Background(), compiled)
	if w == nil {
		t.Fatal("the ready container of the runner from source was not handed to a program of the compiled one")
	}
	pl.dropLater(w)
	pl.done(compiled, false)
}

// TestPoolUnitFirstRunRefillsLater: the pool's first run, cold and
// alone, refills after loneDelay, and a pool closed meanwhile starts
// nothing; a second run (it went cold) refills at once, as do a later
// lone cold run, a warm run, and a first run with known runs to come;
// a key drained before the delay gets none.
func TestPoolUnitFirstRunRefillsLater(t *testing.T) {
	slow := func(t *testing.T) (*starter, *pool) {
		st := &starter{}
		pl := stubPool(t, 2, 4, st)
		pl.loneDelay = time.Hour
		return st, pl
	}
	refillsAtOnce := func(t *testing.T, pl *pool, warm bool) {
		t.Helper()
		pl.done(stubProgram, warm)
		if n := fillsNow(pl); n == 0 {
			t.Fatal("no fill right after the run; want a refill at once")
		}
	}
	t.Run("closed before the delay", func(t *testing.T) {
		st, pl := slow(t)
		pl.take(context.Background(), stubProgram)
		pl.done(stubProgram, false)
		if n := fillsNow(pl); n != 0 {
			t.Fatalf("%d fills right after the first run; want none before the delay", n)
		}
		pl.close() // ends the wait: it returns, the hour not waited
		if made, _ := st.counts(); made != 0 {
			t.Errorf("%d containers started for a pool closed before the delay; want 0", made)
		}
	})
	t.Run("a second run", func(t *testing.T) {
		_, pl := slow(t)
		pl.take(context.Background(), stubProgram)
		pl.done(stubProgram, false)
		if w := pl.take(context.Background(), stubProgram); w != nil {
			t.Fatal("a container handed out before any refill")
		}
		refillsAtOnce(t, pl, false)
		eventually(t, "two ready containers", func() bool { return pl.ready() == 2 })
	})
	t.Run("a later lone cold run", func(t *testing.T) {
		_, pl := slow(t)
		pl.ranBefore = true // a run ended before, its demand long gone
		pl.take(context.Background(), stubProgram)
		refillsAtOnce(t, pl, false)
	})
	t.Run("a warm run", func(t *testing.T) {
		_, pl := slow(t)
		pl.take(context.Background(), stubProgram)
		refillsAtOnce(t, pl, true)
	})
	t.Run("runs to come", func(t *testing.T) {
		_, pl := slow(t)
		pl.setUpcoming(5)
		pl.take(context.Background(), stubProgram)
		refillsAtOnce(t, pl, false)
	})
	t.Run("a key drained before the delay", func(t *testing.T) {
		st := &starter{}
		pl := stubPool(t, 1, 1, st)
		pl.loneDelay = 20 * time.Millisecond
		for _, ws := range []string{"/a", "/b", "/c"} { // three keys: /a is drained by /c
			p := Program{Image: "img", Workspace: ws}
			pl.take(context.Background(), p)
			pl.done(p, false)
		}
		settled(pl) // the delay passed, its refill and the others' ended
		if made, _ := st.counts(); made != 2 {
			t.Errorf("%d containers started; want 2, one for each recent key (none for the drained one)", made)
		}
	})
	t.Run("after the delay", func(t *testing.T) {
		st := &starter{}
		pl := stubPool(t, 2, 4, st)
		pl.loneDelay = 20 * time.Millisecond
		pl.take(context.Background(), stubProgram)
		pl.done(stubProgram, false)
		eventually(t, "the floor, once the delay passed", func() bool { return pl.ready() == 2 })
	})
}
