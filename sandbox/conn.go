package sandbox

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pybox-dev/pybox/internal/egressmux"
	"github.com/pybox-dev/pybox/internal/engine"
)

// conn is a started container whose runner speaks the frame protocol: a
// cold run's container, a warm-pool entry, or a session's kernel. Every
// frame comes from the runner's supervisor (PID 1, unreachable from the
// program), so what a turn reports is what the program really did.
type conn struct {
	k       Attachment
	frames  *bufio.Reader
	diag    *tailWriter    // the runner's own stderr (it writes there only when it refuses to start)
	writers writerGroup    // request writes and tool calls under way
	wmu     sync.Mutex     // one message at a time on the container's stdin
	mux     *egressmux.Mux // the run's egress streams over this channel; nil: none (net frames break the protocol)

	// oomKnown: the last turn's runner said whether the OOM killer ended
	// its worker (res.OOMKilled holds its word); no need to ask the daemon.
	oomKnown bool

	halted   chan struct{} // closed by halt: pybox stops the program (a turn ends lost)
	haltOnce sync.Once
	haltWhy  error // set before halted is closed
}

// halt makes the turn in flight, or the next one, end at once with why as
// the container's loss (it is then destroyed). The first reason counts.
func (c *conn) halt(why error) {
	c.haltOnce.Do(func() {
		c.haltWhy = why
		close(c.halted)
	})
}

// dial starts spec's container (its command the runner's bootstrap), hands
// it runner (images.RunnerFrame or a compiled one) and waits for the
// runner's ready frame; on failure nothing of it is left. check,
// when given, runs once the container exists, beside the runner's start:
// dial returns only once it has passed, before any program reaches the
// container, and destroys the container when it fails.
func (s *Sandbox) dial(ctx context.Context, spec engine.Spec, runner []byte, learn string, check func(ctx context.Context, id string) error) (*conn, error) {
	diag := &tailWriter{max: 2048}
	spec.Stderr = diag
	k, err := s.eng.Start(ctx, spec)
	if err != nil {
		return nil, s.explain(err)
	}
	checked := make(chan error, 1)
	if check != nil {
		go func() { checked <- check(ctx, k.ContainerID()) }()
	} else {
		checked <- nil
	}
	c := &conn{k: k, frames: bufio.NewReaderSize(k.Output(), 64<<10), diag: diag, halted: make(chan struct{})}
	// The runner itself first (the container's command is only its
	// bootstrap: images.RunnerArgs); then pybox speaks first: the runner
	// says ready once it has read this, so no backend can miss the frame
	// by attaching late. The write (~64 KB) goes on beside the wait for
	// ready, which bounds it: a runner that never reads is destroyed at
	// the wait's end, which ends the write.
	wrote := make(chan error, 1)
	go func() {
		_, err := k.Write(append(slices.Clip(runner), '\n'))
		wrote <- err
	}()
	compiled, err := c.awaitReady(ctx, s.log)
	if err != nil {
		return nil, err
	}
	if learn != "" && len(compiled) > 0 {
		s.runners.learn(learn, compiled, s.log)
	}
	if err := <-wrote; err != nil { // ready came, so it was all read: not seen
		c.destroy(ctx, s.log)
		return nil, fmt.Errorf("%w: %w", errNotReady, err)
	}
	if err := <-checked; err != nil {
		c.destroy(context.WithoutCancel(ctx), s.log)
		return nil, err
	}
	return c, nil
}

// errNotReady: the runner did not come up; its container is gone.
var errNotReady = errors.New("the sandbox's runner did not start")

// awaitReady waits for the runner's ready frame, destroying the container
// when it does not come, and returns the frame's payload (the runner's
// compiled code, when asked for: images.RunnerFrame).
func (c *conn) awaitReady(ctx context.Context, log *slog.Logger) ([]byte, error) {
	got := make(chan error, 1)
	var payload []byte
	go func() {
		f, err := readFrame(c.frames)
		if err == nil && f.kind != "ready" {
			err = fmt.Errorf("%w: expected ready, got %s", errFraming, f.kind)
		}
		payload = f.payload
		got <- err
	}()
	timer := time.NewTimer(probeTimeout)
	defer timer.Stop()
	var err error
	select {
	case err = <-got:
		if err == nil {
			return payload, nil
		}
		c.destroy(ctx, log)
	case <-timer.C:
		err = errors.New("no ready frame within a minute")
		c.destroy(ctx, log) // ends the stream, and so the reader
		<-got
	case <-ctx.Done():
		c.destroy(ctx, log)
		<-got
		return nil, context.Cause(ctx)
	}
	if why := strings.TrimSpace(c.diag.String()); why != "" {
		return nil, fmt.Errorf("%w: %s", errNotReady, why)
	}
	return nil, fmt.Errorf("%w: %w", errNotReady, err)
}

// errTimedOut: the program ran past its deadline and the container was killed.
var errTimedOut = errors.New("the program timed out")

// turnEnd is how an exchange with the runner ended.
type turnEnd struct {
	code      int        // the done frame's exit status
	oom       *bool      // the done frame's word on an OOM kill (nil: none)
	dropped   int64      // output bytes past the cap the runner dropped
	violation *Violation // the guardrails refused the program: it did not run
	err       error      // the container ended, or broke the protocol
}

// turn sends req and collects its output until its done frame, the
// deadline, the container's end or ctx's end. A non-nil lost says why the
// container can no longer be used (it is then destroyed); err is the
// caller's cancellation.
func (c *conn) turn(ctx context.Context, log *slog.Logger, req request, timeout time.Duration, stdout, stderr io.Writer, tools ToolCalls) (res Result, lost, err error) {
	start := time.Now()
	done := make(chan turnEnd, 1)
	// The program's tool calls end with the turn.
	callCtx, endCalls := context.WithCancel(ctx)
	defer endCalls()
	// Sending is part of the turn: a runner that stopped reading must not
	// hold the call past its deadline.
	go func() { done <- c.exchange(callCtx, req, stdout, stderr, tools) }()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	collected := false
	select {
	case end := <-done:
		collected = true
		res.ExitCode, res.Violation, res.DroppedBytes, lost = end.code, end.violation, end.dropped, end.err
		c.runnerSaid(&res, end.oom)
		if lost != nil { // the container ended or broke the protocol: the program's result, not ours
			if why := c.died(log, &res, lost, stderr); why != nil {
				lost, err = why, why // no result to give: the caller gets the failure
			}
		}
	case <-timer.C:
		res.TimedOut, res.ExitCode, lost = true, 137, errTimedOut
	case <-c.halted:
		res.ExitCode, lost = 137, c.haltWhy
		if errors.Is(lost, ErrQuota) {
			res.QuotaExceeded, res.QuotaNote = true, lost.Error()
		}
	case <-ctx.Done():
		err = context.Cause(ctx)
		lost = err
	}
	elapsed := time.Since(start)
	if lost != nil {
		endCalls()          // a call under way does not hold the container's removal
		c.destroy(ctx, log) // and with it the exchange's stream
		if !collected {
			<-done
		}
		if errors.Is(lost, ErrToolFlood) { // written once the exchange no longer writes there
			fmt.Fprintf(stderr, "\npybox: %v\n", lost)
		}
	}
	res.Duration, res.Timeout = elapsed, timeout
	return res, lost, err
}

// exchange sends req and relays its frames until its done frame. The
// request is written while frames are read: the runner relays output and
// reads requests in one loop, so a runner busy writing output a session's
// thread left (nobody reads between calls) takes a large request only once
// we read. The writer is awaited here, or by destroy when the turn fails.
func (c *conn) exchange(ctx context.Context, req request, stdout, stderr io.Writer, tools ToolCalls) turnEnd {
	sent := make(chan error, 1)
	if !c.writers.Go(func() { sent <- c.send(req.encode()) }) {
		sent <- errDestroyed
	}
	// A tool call is answered beside the collection (output keeps flowing
	// while a downstream server works), its reply sent when it is ready.
	// Calls are counted before anything is made for them: a flood ends
	// the turn (see callGate). A stale call (a thread of an earlier
	// program of the session) is refused, and counted the same.
	gate := newCallGate(tools)
	onCall := func(payload []byte, stale bool) {
		if err := gate.admit(); err != nil {
			c.halt(err)
			return
		}
		c.writers.Go(func() {
			defer gate.done()
			reply := staleCall(payload)
			if !stale {
				reply = answer(ctx, tools, payload)
			}
			_ = c.send(reply) // a failed send: the container is going
		})
	}
	v, violation, err := c.collect(req.Nonce, stdout, stderr, onCall)
	if err != nil {
		return turnEnd{err: err} // the container goes; destroy waits for the writer
	}
	if werr := <-sent; werr != nil { // cannot happen after a done or policy frame, which needs the whole request
		return turnEnd{err: fmt.Errorf("send to the runner: %w", werr)}
	}
	return turnEnd{code: v.Code, oom: v.OOM, dropped: v.Dropped, violation: violation}
}

// collect relays out and err frames until the done frame of nonce. Output
// frames of earlier requests are relayed too: in a session, threads that
// outlive their program print between calls.
// send writes one message to the runner's stdin.
func (c *conn) send(msg []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, err := c.k.Write(msg)
	return err
}

func (c *conn) collect(nonce string, stdout, stderr io.Writer, onCall func(payload []byte, stale bool)) (verdict, *Violation, error) {
	for {
		f, err := readFrame(c.frames)
		if err != nil {
			return verdict{}, nil, err
		}
		switch {
		case f.kind == "out":
			stdout.Write(f.payload) // capped writers never fail
		case f.kind == "err":
			stderr.Write(f.payload) // idem
		case f.kind == "done" && f.nonce == nonce:
			v, err := doneStatus(f.payload)
			return v, nil, err
		case f.kind == "call":
			onCall(f.payload, f.nonce != nonce) // another nonce: a thread of an earlier program of the session
		case f.kind == "policy" && f.nonce == nonce:
			v, err := policyViolation(f.payload)
			return verdict{}, v, err
		case f.kind == "net" && c.mux != nil:
			if err := c.mux.Handle(f.payload); err != nil { // never blocks: the streams' windows bound what it keeps
				return verdict{}, nil, fmt.Errorf("%w: %w", errFraming, err)
			}
		case f.kind == "abort":
			return verdict{}, nil, fmt.Errorf("%w: %.200s", errAborted, f.payload)
		case f.kind == "ended": // of any nonce: a session's worker may die between turns
			return verdict{}, nil, endedStatus(f.payload)
		default:
			return verdict{}, nil, fmt.Errorf("%w: unexpected %s frame", errFraming, f.kind)
		}
	}
}

// died records in res how the container ended a turn on its own. It
// returns an error when nothing is known of the program's end: the
// connection to the daemon broke (ErrDaemonLost), or the daemon did not
// report the container's exit in time (ErrNoVerdict); never a status 0.
func (c *conn) died(log *slog.Logger, res *Result, why error, stderr io.Writer) error {
	attrs := []any{"container_id", shortID(c.k.ContainerID()), "err", why}
	if own := strings.TrimSpace(c.diag.String()); own != "" { // the runner's own failure (a traceback of pybox's code), bounded
		attrs = append(attrs, "runner_stderr", own)
	}
	log.Warn("runner ended during a program", attrs...)
	if errors.Is(why, errFraming) || errors.Is(why, errAborted) {
		// It may still run, so there is no exit to wait for: we kill it.
		fmt.Fprintf(stderr, "\npybox: %v\n", why)
		res.ExitCode = 137
		return nil
	}
	if e := (*workerEnded)(nil); errors.As(why, &e) && c.runnerSaid(res, e.OOM) {
		// The runner said how its worker ended: no need to wait for the
		// daemon, whose word on an OOM kill comes late on a busy machine.
		res.ExitCode = e.Code
		return nil
	}
	switch known, lost := c.exitInto(res); {
	case !known:
		res.ExitCode = -1
		return ErrNoVerdict
	case lost:
		return ErrDaemonLost
	}
	// The supervisor sends its verdict before it exits; status 2 without
	// one is the runtime's own kill (gVisor's, past the process limit).
	res.ResourceKilled = res.ExitCode == 2 && !res.OOMKilled
	if res.ResourceKilled {
		fmt.Fprintf(stderr, "\npybox: %s\n", resourceKillNote)
	}
	return nil
}

// resourceKillNote explains a ResourceKilled result.
const resourceKillNote = "the sandbox was killed for exceeding its resource limits (too many processes or threads: under gVisor, " +
	"passing the process limit aborts the whole sandbox, and output written after that point is lost)"

// runnerSaid records in res the runner's word on whether the OOM killer
// ended its worker (oom; nil: it has none, as under gVisor) and tells the
// attachment that the daemon need not be asked. It reports whether there
// was a word.
func (c *conn) runnerSaid(res *Result, oom *bool) bool {
	c.oomKnown = oom != nil
	if c.oomKnown {
		res.OOMKilled = *oom
		c.explained()
	}
	return c.oomKnown
}

// explainedExit is implemented by attachments that would otherwise ask
// their engine, once the container has exited with status 137, whether
// the OOM killer ended it (engine.Attached): ExitExplained says the
// runner has answered that already.
type explainedExit interface{ ExitExplained() }

// explained tells c's attachment, if it asks, that the runner has said
// whether the OOM killer ended the program.
func (c *conn) explained() {
	if e, ok := c.k.(explainedExit); ok {
		e.ExitExplained()
	}
}

// exitInto records how the container ended, waiting at most teardownWait
// (or the attachment's own exitLatency) for the daemon to report its exit:
// known is false when it did not, lost is true when the connection to the
// daemon broke instead.
func (c *conn) exitInto(res *Result) (known, lost bool) {
	wait := teardownWait
	if l, ok := c.k.(exitLatency); ok {
		wait = l.ExitLatency()
	}
	select {
	case <-c.k.Done():
		x := c.k.Exit()
		res.ExitCode, res.OOMKilled = x.Code, x.OOMKilled
		return true, x.Lost
	case <-time.After(wait):
		return false, false
	}
}

// ErrNoVerdict: the runner's stream ended without its verdict and the
// daemon did not report the container's exit within teardownWait (or the
// attachment's exitLatency), so nothing is known of the program's end
// (never a pass).
var ErrNoVerdict = errors.New("the sandbox's runner stopped answering without a verdict and Docker did not report how its container ended; " +
	"the program's outcome is unknown, and its container is removed")

// exited reports how the container ended, if it has.
func (c *conn) exited() (engine.Exit, bool) {
	select {
	case <-c.k.Done():
		return c.k.Exit(), true
	default:
		return engine.Exit{}, false
	}
}

// destroy removes the container, which ends any request write, and waits
// for those; no writer starts after it. Safe to call more than once, and
// while an exchange runs (a session closed mid-program).
func (c *conn) destroy(ctx context.Context, log *slog.Logger) {
	if err := c.k.Destroy(ctx); err != nil {
		log.Error("container not removed", "container_id", shortID(c.k.ContainerID()), "err", err)
	}
	c.writers.close()
}

// errDestroyed: the container went before a write could start.
var errDestroyed = errors.New("the sandbox's container was removed")

// writerGroup runs and awaits a conn's writers. Unlike a bare WaitGroup,
// a writer started while close waits (an exchange still running when its
// container is destroyed) is refused instead of racing with the wait.
type writerGroup struct {
	mu     sync.Mutex
	wg     sync.WaitGroup
	closed bool
}

// Go runs f unless the group is closed, and says whether it did.
func (g *writerGroup) Go(f func()) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.wg.Go(f)
	return true
}

// close refuses further writers and waits for those under way.
func (g *writerGroup) close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.wg.Wait()
}

func shortID(id string) string { return id[:min(len(id), 12)] }
