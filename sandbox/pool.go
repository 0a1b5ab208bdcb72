package sandbox

import (
	"context"
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pybox-dev/pybox/internal/engine"
)

// The warm pool keeps a few started containers per environment whose
// runner waits (mode "wait") for its one program on stdin. A run takes one,
// uses it once, and it is removed; the pool refills in the background. This
// takes container creation, start and interpreter start-up off the run's
// path. Pool containers have the same configuration as cold ones.

const (
	poolKeys    = 2               // environments kept warm at once (the most recent)
	poolMaxIdle = 5 * time.Minute // a warm container idle longer is replaced
)

// warm is one ready container.
type warm struct {
	k       *engine.Attached
	stderr  *switchWriter
	started time.Time
}

// pool holds the ready containers by key; see Sandbox.takeWarm.
type pool struct {
	size    int
	mu      sync.Mutex
	idle    map[string][]*warm
	filling map[string]int
	recent  []string // keys, most recent last
	closed  bool
	wg      sync.WaitGroup // fills and background removals
}

// poolKey is what a warm container must match: image, interpreter and the
// mounted workspace (limits and runtime are the Sandbox's own).
func poolKey(p Program) string {
	return p.Image + "\x00" + strings.Join(p.Python, "\x00") + "\x00" + p.Workspace
}

// takeWarm returns a ready container for p, or nil, and asks for a refill.
func (s *Sandbox) takeWarm(p Program) *warm {
	if s.pool.size <= 0 || p.Workspace == "" {
		return nil
	}
	key := poolKey(p)
	s.pool.mu.Lock()
	s.pool.touch(key)
	var got *warm
	for got == nil && len(s.pool.idle[key]) > 0 {
		w := s.pool.idle[key][0]
		s.pool.idle[key] = s.pool.idle[key][1:]
		if w.usable() {
			got = w
		} else {
			s.pool.dropLater(w)
		}
	}
	s.pool.mu.Unlock()
	s.refill(key, p)
	return got
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
	select {
	case <-w.k.Done():
		return false
	default:
		return time.Since(w.started) < poolMaxIdle
	}
}

// dropLater removes w in the background. Called with mu held.
func (pl *pool) dropLater(w *warm) {
	pl.wg.Go(func() { w.k.Destroy(context.Background()) }) // Destroy logs nothing; a failure leaves it to the reaper
}

// refill starts containers for key until the pool holds size of them.
func (s *Sandbox) refill(key string, p Program) {
	s.pool.mu.Lock()
	defer s.pool.mu.Unlock()
	if s.pool.closed {
		return
	}
	need := s.pool.size - len(s.pool.idle[key]) - s.pool.filling[key]
	for range max(need, 0) {
		s.pool.filling[key]++
		s.pool.wg.Go(func() { s.startWarm(key, p) })
	}
}

// startWarm starts one container and adds it to the pool (or removes it
// when the pool closed or moved on meanwhile).
func (s *Sandbox) startWarm(key string, p Program) {
	plan := s.plan(Program{Image: p.Image, Python: p.Python, Workspace: p.Workspace}, "wait")
	plan.Labels = s.owner.Labels("pool")
	plan.Stdin = true
	cfg, host := ContainerConfig(plan)
	sw := &switchWriter{}
	// Never a caller's context: the container outlives the call that asked.
	k, err := s.eng.StartAttached(context.Background(), engine.Spec{Name: s.owner.ContainerName("pool"), Config: cfg, Host: host, Stderr: sw})
	s.pool.mu.Lock()
	defer s.pool.mu.Unlock()
	s.pool.filling[key]--
	if err != nil {
		s.log.Warn("warm container did not start", "err", err)
		return
	}
	w := &warm{k: k, stderr: sw, started: time.Now()}
	if s.pool.closed || indexOf(s.pool.recent, key) < 0 {
		s.pool.dropLater(w)
		return
	}
	s.pool.idle[key] = append(s.pool.idle[key], w)
}

// close removes every idle container and waits for fills and removals.
func (pl *pool) close() {
	pl.mu.Lock()
	pl.closed = true
	for _, ws := range pl.idle {
		for _, w := range ws {
			pl.dropLater(w)
		}
	}
	pl.idle = map[string][]*warm{}
	pl.mu.Unlock()
	pl.wg.Wait()
}

// warmRequest is the runner's one request in wait mode.
type warmRequest struct {
	File    string  `json:"file"`
	Stdin   *string `json:"stdin"`
	Outputs string  `json:"outputs,omitempty"`
}

// runWarm runs p in w. The container is removed afterwards: at once when
// it must be killed, in the background when the program ended by itself.
func (s *Sandbox) runWarm(ctx context.Context, w *warm, p Program, timeout time.Duration, stdout, stderr io.Writer) (Result, error) {
	w.stderr.set(stderr)
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		_, _ = io.Copy(stdout, w.k.Stdout) // ends when the container's streams close
	}()
	req := warmRequest{File: WorkspaceMount + "/" + p.File, Stdin: p.Stdin}
	if p.Outputs != "" {
		req.Outputs = WorkspaceMount + "/" + p.Outputs
	}
	body, _ := json.Marshal(req) // strings always marshal
	start := time.Now()
	res := Result{Timeout: timeout}
	_, werr := w.k.Write(append([]byte(strconv.Itoa(len(body))+"\n"), body...))
	err := s.awaitWarm(ctx, w, timeout, werr, &res)
	res.Duration = time.Since(start)
	select {
	case <-copied:
	case <-time.After(5 * time.Second):
		w.k.Destroy(context.Background()) // closes the stream the copy reads
		<-copied
	}
	s.pool.mu.Lock()
	s.pool.dropLater(w)
	s.pool.mu.Unlock()
	return res, err
}

// awaitWarm waits for the program's end, killing it at the deadline or
// when ctx ends.
func (s *Sandbox) awaitWarm(ctx context.Context, w *warm, timeout time.Duration, werr error, res *Result) error {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	if werr != nil {
		s.log.Warn("could not send the program to a warm container", "err", werr)
	}
	select {
	case <-w.k.Done():
		x := w.k.Exit()
		res.ExitCode, res.OOMKilled = x.Code, x.OOMKilled
		return nil
	case <-timer.C:
		res.TimedOut, res.ExitCode = true, 137
	case <-ctx.Done():
		res.ExitCode = 137
		w.k.Destroy(context.Background())
		return context.Cause(ctx)
	}
	w.k.Destroy(context.Background())
	return nil
}

// switchWriter forwards to a writer chosen after the container started.
type switchWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (sw *switchWriter) set(w io.Writer) {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	sw.w = w
}

func (sw *switchWriter) Write(p []byte) (int, error) {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if sw.w == nil {
		return len(p), nil // before its program: the runner prints nothing
	}
	return sw.w.Write(p)
}
