package sandbox

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The warm pool keeps a few started containers per environment whose
// runner (mode "once") has said it is ready and waits for its one program.
// A run takes one, uses it once, and it is removed; the pool refills in the
// background. This takes container creation, start and interpreter start-up
// off the run's path. Pool containers are exactly the cold ones, made
// ahead: same configuration, same private output folder per container. A
// waiting runner has imported nothing but the standard library: no code of
// the workspace, site-packages or any program runs in a container nobody
// called.

const (
	poolKeys     = 2                // environments kept warm at once (the most recent)
	poolMaxIdle  = 5 * time.Minute  // a warm container idle longer is replaced
	demandWindow = 10 * time.Second // runs started this recently count as demand
	shrinkAfter  = 30 * time.Second // extra containers idle this long go
	poolCeiling  = 8                // most ready containers per environment
	maxFills     = 2                // containers being started for the pool at once
	joinWait     = 30 * time.Second // how long a run waits for a container being started for it (pool.joinWait)
	loneDelay    = time.Second      // the first run's refill waits this long (pool.loneDelay)
)

// warm is one ready container and the output folder mounted into it.
type warm struct {
	*conn
	outputs     *Outputs   // nil once handed to a run
	outputsNote string     // why there is no output folder, if there is none
	net         *egressRun // its egress folder (runs with an allowlist), nil once handed to a run
	started     time.Time
}

// pool holds the ready containers by key; see Sandbox.takeWarm. Its size
// per key follows demand: the runs started in the last demandWindow plus
// those running, between floor and ceiling; extras idle for shrinkAfter go.
type pool struct {
	floor, ceiling int
	joinWait       time.Duration // how long a run waits for a container being started for it
	loneDelay      time.Duration // how long the first run's refill waits; see done
	ranBefore      bool          // a run ended before (done)
	// start starts one ready container for a program (Sandbox.startOnce);
	// never with a caller's context: the container outlives the call.
	start   func(context.Context, Program) (*warm, error)
	log     *slog.Logger
	mu      sync.Mutex
	idle    map[string][]*warm
	filling map[string]int
	waiting map[string]int // runs waiting for a fill, by key
	changed chan struct{}  // closed when a fill ends; see changes
	demand  map[string]*demand
	recent  []string // keys, most recent last
	// upcoming is how many more runs the caller will start (see
	// Sandbox.Upcoming), all keys together; negative: unknown.
	upcoming int
	closed   bool
	// ctx is the fills' context, ended by close: a container still being
	// started for a pool that closed is not started to be removed at once.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // fills and background removals
}

// newPool returns a pool keeping floor ready containers per key, up to
// ceiling under demand; floor 0 disables it.
func newPool(floor, ceiling int, start func(context.Context, Program) (*warm, error), log *slog.Logger) *pool {
	ctx, cancel := context.WithCancel(context.Background())
	return &pool{floor: floor, ceiling: max(floor, ceiling), joinWait: joinWait, loneDelay: loneDelay, start: start, log: log, idle: map[string][]*warm{},
		filling: map[string]int{}, waiting: map[string]int{}, demand: map[string]*demand{}, upcoming: -1, ctx: ctx, cancel: cancel}
}

// demand is a key's recent use.
type demand struct {
	starts  []time.Time // recent run starts, oldest first
	running int
}

// target is how many ready containers key should have now. Called with mu held.
func (pl *pool) target(key string, now time.Time) int {
	d := pl.demand[key]
	if d == nil {
		return pl.floor
	}
	recent := 0
	for _, t := range d.starts {
		if now.Sub(t) < demandWindow {
			recent++
		}
	}
	return min(max(pl.floor, recent+d.running), pl.ceiling)
}

// started records a run of key. Called with mu held.
func (pl *pool) started(key string, now time.Time) {
	d := pl.demand[key]
	if d == nil {
		d = &demand{}
		pl.demand[key] = d
	}
	d.starts = append(d.starts, now)
	if len(d.starts) > 2*pl.ceiling {
		d.starts = d.starts[len(d.starts)-2*pl.ceiling:]
	}
	d.running++
}

// poolKey is what a warm container must match: image, interpreter and the
// mounted workspace (limits and runtime are the Sandbox's own). How its
// runner started (Program.Runner: from source, or compiled ahead for that
// image and interpreter) is not: the same runner runs either way.
func poolKey(p Program) string {
	return p.Image + "\x00" + strings.Join(p.Python, "\x00") + "\x00" + p.Workspace + "\x00" + strconv.FormatBool(p.scratch()) + "\x00" + strconv.FormatBool(p.egress())
}

// pooled: runs of p may use warm containers (those with a workspace of
// their own: not probes). A warm container for runs with an allowlist has
// its egress folder mounted, the socket listening; the proxy starts when
// a run takes it.
func (p Program) pooled() bool { return p.Workspace != "" || p.scratch() }

// take returns a ready container for p, or nil, and counts the run
// as demand; done must follow when the run is over. When none is ready
// but one is being started for p (and not already awaited by another run),
// it waits for that one, up to joinWait: a container part-way up is ready
// sooner than a new one, and starting another would only compete with it.
// The bound is that of a start on a loaded machine (seconds each), not of
// an idle one: a run that gave up after one second started a second
// container beside the first, which loaded the machine more, slowed the
// next starts past the bound in turn, and left the pool a surplus to
// remove unused (a suite bound by CPU: 203 containers for 72 calls). A
// start that fails ends the wait at once (the run goes cold then).
func (pl *pool) take(ctx context.Context, p Program) *warm {
	if pl.floor <= 0 || !p.pooled() {
		return nil
	}
	key := poolKey(p)
	wait, cancel := context.WithTimeout(ctx, pl.joinWait)
	defer cancel()
	pl.mu.Lock()
	defer pl.mu.Unlock()
	pl.touch(key)
	pl.started(key, time.Now())
	for {
		w := pl.takeIdle(key)
		if w != nil || wait.Err() != nil || pl.waiting[key] >= pl.filling[key] {
			return w
		}
		changed := pl.changes()
		pl.waiting[key]++
		pl.mu.Unlock()
		select {
		case <-changed:
		case <-wait.Done(): // then one last look, and cold
		}
		pl.mu.Lock()
		pl.waiting[key]--
	}
}

// takeIdle pops key's oldest usable idle container, or nil. Called with mu held.
func (pl *pool) takeIdle(key string) *warm {
	for len(pl.idle[key]) > 0 {
		w := pl.idle[key][0]
		pl.idle[key] = pl.idle[key][1:]
		if w.usable() {
			return w
		}
		pl.dropLater(w)
	}
	return nil
}

// changes is closed the next time a fill ends. Called with mu held.
func (pl *pool) changes() <-chan struct{} {
	if pl.changed == nil {
		pl.changed = make(chan struct{})
	}
	return pl.changed
}

// ready is how many ready containers the pool holds, all keys together.
func (pl *pool) ready() int {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	return pl.readyLocked()
}

// readyLocked is ready, called with mu held.
func (pl *pool) readyLocked() int {
	n := 0
	for _, ws := range pl.idle {
		n += len(ws)
	}
	return n
}

// setUpcoming records how many more runs the caller will start
// (negative: unknown); see Sandbox.Upcoming.
func (pl *pool) setUpcoming(n int) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	pl.upcoming = n
}

// done ends a run counted by take (warm: it had a ready container) and
// refills p's key: after the run, so the refill's container starts do not
// compete with it.
//
// The pool's first run, cold, alone (none running, the runs to come
// unknown), refills after loneDelay: a client that makes one call and
// goes (a script, a one-shot session, a CI step) leaves no container
// nobody uses, while an agent's next call, seconds later, finds them
// ready. A run that comes meanwhile goes cold too, and its end refills at
// once, as every later run's does.
func (pl *pool) done(p Program, warm bool) {
	if pl.floor <= 0 || !p.pooled() {
		return
	}
	key := poolKey(p)
	pl.mu.Lock()
	first := !pl.ranBefore
	pl.ranBefore = true
	if d := pl.demand[key]; d != nil {
		d.running--
		if first && !warm && d.running == 0 && pl.upcoming < 0 && pl.loneDelay > 0 {
			pl.refillAfter(pl.loneDelay, key, p)
			pl.mu.Unlock()
			return
		}
	}
	pl.mu.Unlock()
	pl.refill(key, p)
}

// refillAfter refills key after delay, unless the pool closes first.
// Called with mu held (a closed pool's wait group takes no more).
func (pl *pool) refillAfter(delay time.Duration, key string, p Program) {
	if pl.closed {
		return
	}
	pl.wg.Go(func() {
		t := time.NewTimer(delay)
		defer t.Stop()
		select {
		case <-t.C:
			pl.refill(key, p)
		case <-pl.ctx.Done():
		}
	})
}

// touch makes key the most recent; keys beyond poolKeys are drained.
// Called with mu held.
func (pl *pool) touch(key string) {
	if i := indexOf(pl.recent, key); i >= 0 {
		pl.recent = append(pl.recent[:i], pl.recent[i+1:]...)
	}
	pl.recent = append(pl.recent, key)
	for len(pl.recent) > poolKeys {
		old := pl.recent[0]
		pl.recent = pl.recent[1:]
		for _, w := range pl.idle[old] {
			pl.dropLater(w)
		}
		delete(pl.idle, old)
		delete(pl.demand, old)
	}
}

func indexOf(list []string, v string) int {
	for i, x := range list {
		if x == v {
			return i
		}
	}
	return -1
}

// usable reports whether w is still alive and fresh.
func (w *warm) usable() bool {
	if _, ended := w.exited(); ended || w.k.Broken() { // exited, or its stream cut (the daemon restarted)
		return false
	}
	return time.Since(w.started) < poolMaxIdle
}

// dropLater removes w and its unused output folder in the background;
// Close waits for it. A failure is logged and leaves it to the reaper.
func (pl *pool) dropLater(w *warm) {
	pl.wg.Go(func() {
		w.destroy(context.Background(), pl.log)
		w.net.close(pl.log)
		if err := w.outputs.Remove(); err != nil {
			pl.log.Warn("run output folder not removed", "err", err)
		}
	})
}

// refill starts containers for key until the pool holds size of them;
// none for a key no longer among the recent (drained by touch meanwhile:
// a run of it that ended late, the first run's delayed refill).
func (pl *pool) refill(key string, p Program) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if pl.closed || indexOf(pl.recent, key) < 0 {
		return
	}
	need := pl.target(key, time.Now()) - len(pl.idle[key]) - pl.filling[key]
	if pl.upcoming >= 0 { // no container past the runs still to come
		need = min(need, pl.upcoming-pl.readyLocked()-pl.fills())
	}
	for range min(max(need, 0), maxFills-pl.fills()) {
		pl.filling[key]++
		pl.wg.Go(func() { pl.fill(key, p) })
	}
}

// fills counts the fills under way, all keys together. Called with mu held.
func (pl *pool) fills() int {
	n := 0
	for _, f := range pl.filling {
		n += f
	}
	return n
}

// fill starts one container and adds it to the pool (or removes it when
// the pool closed or moved on meanwhile).
// Fills go on one after another, maxFills at a time, until the key has
// its target: a burst of demand grows the pool without a storm of
// container starts competing with the runs on the host's cores.
func (pl *pool) fill(key string, p Program) {
	// Never a caller's context: the container outlives the call that asked.
	w, err := pl.start(pl.ctx, p)
	if pl.pooled(key, w, err) {
		pl.refill(key, p)
	}
}

// pooled adds a started container to key's idle list (or drops it when
// the pool closed or moved on) and reports whether to go on filling.
func (pl *pool) pooled(key string, w *warm, err error) bool {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	pl.filling[key]--
	if pl.changed != nil { // wake the runs waiting for a fill
		close(pl.changed)
		pl.changed = nil
	}
	if err != nil {
		if !pl.closed { // else stopped by close
			pl.log.Warn("warm container did not start", "err", err)
		}
		return false
	}
	if pl.closed || indexOf(pl.recent, key) < 0 {
		pl.dropLater(w)
		return false
	}
	pl.idle[key] = append(pl.idle[key], w)
	return true
}

// startOnce starts a container whose runner waits for one program of p's
// environment and workspace, with a private output folder mounted; role
// is run (a cold run's) or pool.
func (s *Sandbox) startOnce(ctx context.Context, p Program, role string) (*warm, error) {
	net, err := s.listenEgress(p)
	if err != nil {
		return nil, err
	}
	plan := s.plan(p, "once")
	plan.withEgress(net)
	plan.Labels = s.labels(role, plan)
	outputs, err := s.newOutputs(p.Workspace)
	note := ""
	if err != nil { // a program replaced outputs/ in the shared workspace: run without one
		s.log.Warn("run output folder unavailable", "err", err)
		note = "figures and output files were not collected: outputs/ in the workspace is not a folder pybox can use"
	}
	plan.Outputs = outputs
	c, err := s.start(ctx, plan, role)
	if err == nil {
		if err = net.bind(c); err != nil {
			c.destroy(context.WithoutCancel(ctx), s.log)
		}
	}
	if err != nil {
		outputs.Remove()
		net.close(s.log)
		return nil, err
	}
	return &warm{conn: c, outputs: outputs, outputsNote: note, net: net, started: time.Now()}, nil
}

// sweep drops idle containers that are stale, or beyond their key's
// target for longer than shrinkAfter.
func (pl *pool) sweep(now time.Time) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	for key, ws := range pl.idle {
		keep := ws[:0]
		want := pl.target(key, now)
		for _, w := range ws {
			if !w.usable() || (len(keep) >= want && now.Sub(w.started) > shrinkAfter) {
				pl.dropLater(w)
				continue
			}
			keep = append(keep, w)
		}
		pl.idle[key] = keep
	}
}

// close removes every idle container, stops the fills under way and waits
// for them and the removals.
func (pl *pool) close() {
	pl.mu.Lock()
	pl.closed = true
	pl.cancel()
	for _, ws := range pl.idle {
		for _, w := range ws {
			pl.dropLater(w)
		}
	}
	pl.idle = map[string][]*warm{}
	pl.mu.Unlock()
	pl.wg.Wait()
}
