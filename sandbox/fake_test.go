package sandbox_test

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pybox-dev/pybox/internal/engine"
	"github.com/pybox-dev/pybox/sandbox"
)

// fakeBackend is a sandbox.Backend without containers, for the state
// machines (pool, runs, close) under timings Docker does not give on
// demand: its containers speak the runner's protocol (ready once written
// to, then out and done per request) and it counts what was started and
// removed. It is in addition to the real-Docker tests, never instead.
type fakeBackend struct {
	startDelay func() time.Duration // before a container is "running"
	failStart  func() error         // non-nil: Start fails with it
	failRemove func(id string) bool // true: this removal fails (the daemon away)
	onRemove   func(id string)      // called before a removal, which waits for it
	hanging    chan string          // gets a container's id when a program "hang" starts
	takenUIDs  int                  // this many uid checks find another container with the uid
	loseAnswer func() bool          // true: Start creates the container, then fails (its answer lost)

	mu      sync.Mutex
	live    map[string]bool // created and not removed
	labels  map[string]map[string]string
	uids    []string // the pybox.uid label of each container started
	users   []string // the user of each container started
	started int
	strays  map[string]bool
	seq     int
}

func newFake() *fakeBackend {
	return &fakeBackend{live: map[string]bool{}, labels: map[string]map[string]string{}, strays: map[string]bool{}, hanging: make(chan string, 16)}
}

func (f *fakeBackend) Start(ctx context.Context, spec engine.Spec) (sandbox.Attachment, error) {
	if f.failStart != nil {
		if err := f.failStart(); err != nil {
			return nil, err
		}
	}
	f.mu.Lock()
	f.seq++
	id := fmt.Sprintf("fake-%d", f.seq)
	f.live[id] = true // created, whatever happens next: the caller owns it
	f.labels[id] = spec.Config.Labels
	f.uids = append(f.uids, spec.Config.Labels[sandbox.LabelUID])
	f.users = append(f.users, spec.Config.User)
	f.started++
	f.mu.Unlock()
	if f.loseAnswer != nil && f.loseAnswer() {
		return nil, fmt.Errorf("fake: create %s: %w", id, io.ErrUnexpectedEOF)
	}
	if f.startDelay != nil {
		time.Sleep(f.startDelay()) // not cancellable, like a container start
	}
	c := &fakeContainer{b: f, id: id, done: make(chan struct{}), kernel: strings.HasSuffix(strings.Join(spec.Config.Cmd, " "), "kernel")}
	c.inR, c.inW = io.Pipe()
	c.outR, c.outW = io.Pipe()
	c.wg.Go(c.serve)
	return c, nil
}

func (f *fakeBackend) Run(ctx context.Context, spec engine.Spec) (engine.Exit, error) {
	return engine.Exit{}, errors.New("fake: no probes")
}

func (f *fakeBackend) List(ctx context.Context, labels map[string]string) ([]engine.Summary, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []engine.Summary
	if _, ok := labels[sandbox.LabelUID]; ok && f.takenUIDs > 0 {
		f.takenUIDs--
		out = append(out, engine.Summary{ID: "elsewhere", Name: "another-server", State: "running"})
	}
	for id := range f.live {
		if !hasLabels(f.labels[id], labels) {
			continue
		}
		out = append(out, engine.Summary{ID: id, Name: id, State: "running"})
	}
	return out, nil
}

func hasLabels(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

func (f *fakeBackend) Remove(ctx context.Context, id string) error {
	if f.onRemove != nil {
		f.onRemove(id)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failRemove != nil && f.failRemove(id) {
		f.strays[id] = true
		return fmt.Errorf("fake: remove %s: the daemon is away", id)
	}
	delete(f.live, id)
	delete(f.strays, id)
	return nil
}

func (f *fakeBackend) RemoveStrays(ctx context.Context) int {
	f.mu.Lock()
	ids := make([]string, 0, len(f.strays))
	for id := range f.strays {
		ids = append(ids, id)
	}
	f.mu.Unlock()
	for _, id := range ids {
		_ = f.Remove(ctx, id)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.strays)
}

// counts returns how many containers are live and how many were started.
func (f *fakeBackend) counts() (live, started int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.live), f.started
}

// fakeContainer answers requests as the runner's supervisor would: a
// program's stdout is "ran: " and its code; code "exit N" ends with N;
// code "die" ends the stream without a verdict (a killed runner); code
// "vanish" ends it without a verdict and the "daemon" never reports an exit.
type fakeContainer struct {
	b          *fakeBackend
	id         string
	kernel     bool
	inR, outR  *io.PipeReader
	inW, outW  *io.PipeWriter
	done       chan struct{}
	exitOnce   sync.Once
	exit       engine.Exit
	wg         sync.WaitGroup
	destroyOne sync.Once
}

func (c *fakeContainer) ContainerID() string         { return c.id }
func (c *fakeContainer) Output() io.Reader           { return c.outR }
func (c *fakeContainer) Write(p []byte) (int, error) { return c.inW.Write(p) }
func (c *fakeContainer) Done() <-chan struct{}       { return c.done }
func (c *fakeContainer) Exit() engine.Exit           { return c.exit }

// ExitLatency: the fake reports an exit as it happens (end closes done
// with the stream or before it); the margin is a goroutine's turn on a
// loaded machine, not Docker's 15 s.
func (c *fakeContainer) ExitLatency() time.Duration { return 2 * time.Second }

func (c *fakeContainer) Broken() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

func (c *fakeContainer) end(code int) {
	c.exitOnce.Do(func() {
		c.exit = engine.Exit{Code: code}
		close(c.done)
	})
}

func (c *fakeContainer) Destroy(ctx context.Context) error {
	var err error
	c.destroyOne.Do(func() {
		c.inW.CloseWithError(io.ErrClosedPipe)
		c.outR.CloseWithError(io.ErrClosedPipe)
		c.wg.Wait()
		c.end(137)
		err = c.b.Remove(ctx, c.id)
	})
	return err
}

func (c *fakeContainer) frame(nonce, kind string, payload []byte) error {
	_, err := fmt.Fprintf(c.outW, "PYBOX %s %s %d\n%s", nonce, kind, len(payload), payload)
	return err
}

func (c *fakeContainer) serve() {
	defer c.outW.Close()
	in := bufio.NewReader(c.inR)
	// The runner itself first, as the bootstrap reads it (images.RunnerArgs).
	head, err := in.ReadString('\n')
	n, nerr := strconv.Atoi(strings.TrimSuffix(head[min(len(head), 1):], "\n"))
	if err != nil || nerr != nil || !strings.ContainsRune("SsM", rune(head[0])) {
		return
	}
	if _, err := in.Discard(n); err != nil {
		return
	}
	if b, err := in.ReadByte(); err != nil || b != '\n' {
		return // pybox speaks first
	}
	if c.frame("-", "ready", nil) != nil {
		return
	}
	for {
		line, err := in.ReadString('\n')
		if err != nil {
			return
		}
		n, err := strconv.Atoi(strings.TrimSpace(line))
		if err != nil {
			return
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(in, body); err != nil {
			return
		}
		var req struct {
			Nonce string  `json:"nonce"`
			Code  *string `json:"code"`
		}
		if json.Unmarshal(body, &req) != nil || req.Code == nil {
			return
		}
		code := 0
		switch {
		case *req.Code == "die":
			c.end(137)
			return
		case *req.Code == "vanish": // the stream ends, and no exit is ever reported
			return
		case *req.Code == "hang": // until the container goes
			c.b.hanging <- c.id
			_, _ = io.Copy(io.Discard, in)
			return
		case strings.HasPrefix(*req.Code, "net "): // egress channel messages (hex) the runner's side forges, then the verdict
			for _, m := range strings.Fields(strings.TrimPrefix(*req.Code, "net ")) {
				b, _ := hex.DecodeString(m)
				if c.frame(req.Nonce, "net", b) != nil {
					return
				}
			}
		case strings.HasPrefix(*req.Code, "exit "):
			code, _ = strconv.Atoi(strings.TrimPrefix(*req.Code, "exit "))
		}
		if c.frame(req.Nonce, "out", []byte("ran: "+*req.Code+"\n")) != nil ||
			c.frame(req.Nonce, "done", []byte(fmt.Sprintf(`{"code": %d}`, code))) != nil {
			return
		}
		if !c.kernel {
			c.end(code)
			return
		}
	}
}

func fakeSandbox(t *testing.T, f *fakeBackend, cfg sandbox.Config) *sandbox.Sandbox {
	t.Helper()
	cfg.Backend = f
	cfg.User = "10001:10001"
	sb, err := sandbox.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return sb
}

func runCode(ctx context.Context, sb *sandbox.Sandbox, code string) (sandbox.Result, error) {
	return sb.Run(ctx, sandbox.Program{File: "main.py", Source: &code})
}

// TestFakeCloseDuringFills: Close while the pool is being filled by slow
// starts and runs are in flight leaves no container, whatever the
// interleaving: fills that end after Close began are removed, not pooled.
func TestFakeCloseDuringFills(t *testing.T) {
	for round := range 20 {
		f := newFake()
		f.startDelay = func() time.Duration { return time.Duration(rand.IntN(40)) * time.Millisecond }
		sb := fakeSandbox(t, f, sandbox.Config{WarmPool: 2, MaxConcurrent: 4})
		var wg sync.WaitGroup
		for i := range 6 {
			wg.Go(func() {
				res, err := runCode(t.Context(), sb, fmt.Sprintf("p%d", i))
				if err == nil && res.Stdout != fmt.Sprintf("ran: p%d\n", i) {
					t.Errorf("round %d run %d: stdout %q", round, i, res.Stdout)
				}
			})
		}
		time.Sleep(time.Duration(rand.IntN(60)) * time.Millisecond)
		sb.Close()
		wg.Wait()
		if live, started := f.counts(); live != 0 {
			t.Fatalf("round %d: %d of %d containers left after Close", round, live, started)
		}
	}
}

// TestFakeWarmRunsAndVerdicts: runs take pool containers once the pool has
// filled, exit statuses are the runner's verdicts, a runner that dies
// without one is reported, and each used container is removed.
func TestFakeWarmRunsAndVerdicts(t *testing.T) {
	f := newFake()
	sb := fakeSandbox(t, f, sandbox.Config{WarmPool: 2})
	defer sb.Close()
	if _, err := runCode(t.Context(), sb, "first"); err != nil { // cold: asks for the pool
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for sb.PoolReady() < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	res, err := runCode(t.Context(), sb, "exit 3")
	if err != nil || !res.Warm || res.ExitCode != 3 || res.Stdout != "ran: exit 3\n" {
		t.Errorf("warm run: %+v, %v", res, err)
	}
	res, err = runCode(t.Context(), sb, "die")
	if err != nil || res.ExitCode != 137 {
		t.Errorf("a runner that dies: %+v, %v", res, err)
	}
	deadline = time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if live, _ := f.counts(); live == sb.PoolReady() {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if live, _ := f.counts(); live != sb.PoolReady() {
		t.Errorf("%d containers live, %d of them pooled: used ones are not removed", live, sb.PoolReady())
	}
}

// TestFakeStraysRemovedAtClose: removals that fail while runs go on (the
// daemon away) are retried when the sandbox closes; a failed start leaves
// nothing and says why.
func TestFakeStraysRemovedAtClose(t *testing.T) {
	f := newFake()
	var mu sync.Mutex
	failing := true
	f.failRemove = func(string) bool { mu.Lock(); defer mu.Unlock(); return failing }
	sb := fakeSandbox(t, f, sandbox.Config{WarmPool: -1})
	for i := range 3 {
		if _, err := runCode(t.Context(), sb, fmt.Sprintf("p%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if live, _ := f.counts(); live != 3 {
		t.Fatalf("%d containers live while removals fail; want the 3 runs'", live)
	}
	mu.Lock()
	failing = false
	mu.Unlock()
	f.failStart = func() error { return errors.New("fake: no such image") }
	if _, err := runCode(t.Context(), sb, "x"); err == nil || !strings.Contains(err.Error(), "no such image") {
		t.Errorf("failed start: %v", err)
	}
	sb.Close()
	if live, _ := f.counts(); live != 0 {
		t.Errorf("%d containers left after Close retried the removals", live)
	}
}

// TestFakeOrphansRemovedAtClose: a container the daemon created but whose
// answer was lost (the connection cut mid-create: pybox never learned its
// id, and a removal by name made at once can come before the daemon is
// done creating it) carries this instance's lease; Close removes every
// container with that lease, not only those it knows, and then the lease.
func TestFakeOrphansRemovedAtClose(t *testing.T) {
	f := newFake()
	var lost atomic.Bool
	f.loseAnswer = lost.Load
	leases := t.TempDir()
	sb := fakeSandbox(t, f, sandbox.Config{WarmPool: -1, LeaseDir: leases})
	if _, err := runCode(t.Context(), sb, "p0"); err != nil {
		t.Fatal(err)
	}
	lost.Store(true)
	if _, err := runCode(t.Context(), sb, "p1"); err == nil {
		t.Fatal("a run whose container's answer was lost succeeded")
	}
	f.mu.Lock()
	orphan := fmt.Sprintf("fake-%d", f.seq)
	created := f.live[orphan]
	f.mu.Unlock()
	if !created {
		t.Fatalf("the fake did not create %s", orphan)
	}
	sb.Close()
	if live, _ := f.counts(); live != 0 {
		t.Errorf("%d containers left after Close; want the orphan removed", live)
	}
	if ents, _ := os.ReadDir(filepath.Join(leases)); len(ents) != 0 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("lease folder after Close: %v; want the lease removed with nothing left", names)
	}
}

// TestFakeSessionClosedMidProgram: closing a session (or the sandbox)
// while its program runs ends the call at once and leaves no container,
// the run's writers included (under -race: no writer starts while they
// are awaited).
func TestFakeSessionClosedMidProgram(t *testing.T) {
	f := newFake()
	sb := fakeSandbox(t, f, sandbox.Config{WarmPool: -1, MaxConcurrent: 16, MaxSessions: 16})
	for round := range 10 {
		id := fmt.Sprintf("s%d", round)
		if res, err := sb.RunInSession(t.Context(), id, sandbox.SessionProgram{Code: "x"}); err != nil || res.Stdout != "ran: x\n" {
			t.Fatalf("session run: %+v, %v", res, err)
		}
		ended := make(chan error, 1)
		go func() {
			_, err := sb.RunInSession(t.Context(), id, sandbox.SessionProgram{Code: "hang"})
			ended <- err
		}()
		<-f.hanging
		time.Sleep(time.Duration(rand.IntN(5)) * time.Millisecond)
		if round%2 == 0 {
			if err := sb.CloseSession(t.Context(), id); err != nil {
				t.Fatal(err)
			}
			select {
			case <-ended:
			case <-time.After(10 * time.Second):
				t.Fatal("the program's call did not end when its session closed")
			}
		}
	}
	sb.Close()
	if live, started := f.counts(); live != 0 {
		t.Errorf("%d of %d containers left", live, started)
	}
}

// TestFakeNoVerdictIsAnError: a runner whose stream ends without a done
// frame, in a container whose exit the daemon does not report (within
// its 15 s wait), gives no status 0: the run is an error (pybox eval
// then records no pass), and the container is removed.
func TestFakeNoVerdictIsAnError(t *testing.T) {
	f := newFake()
	sb := fakeSandbox(t, f, sandbox.Config{WarmPool: -1})
	defer sb.Close()
	res, err := runCode(t.Context(), sb, "vanish")
	if !errors.Is(err, sandbox.ErrNoVerdict) || res.ExitCode == 0 {
		t.Errorf("a run without a verdict or an exit: exit %d, err %v; want ErrNoVerdict and no status 0", res.ExitCode, err)
	}
	sb.Close()
	if live, started := f.counts(); live != 0 {
		t.Errorf("%d of %d containers left", live, started)
	}
}
