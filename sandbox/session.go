package sandbox

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/pybox-dev/pybox/internal/engine"
)

// SessionProgram is one program run in a session.
type SessionProgram struct {
	Image     string   // used only when the session starts
	Python    []string // idem
	Workspace string   // idem: host directory mounted at /workspace
	Code      string
	Filename  string        // shown in tracebacks, e.g. /workspace/code_1a2b.py
	Stdin     *string       // nil: input() raises EOFError
	Timeout   time.Duration // 0 = Limits.Timeout
	Outputs   string        // folder under the workspace for figures; "" = none
	OnOutput  func(stream string, chunk []byte)
	// FollowImage restarts a live session whose image is not Image (say,
	// packages were installed since it started) before running; the
	// result's SessionNote says its variables were reset. Without it a
	// session keeps the image it started with.
	FollowImage bool
}

// session is one live kernel container.
type session struct {
	id        string
	image     string
	python    []string
	workspace string
	created   time.Time

	mu       sync.Mutex // one program at a time; guards the fields below
	kernel   *engine.Attached
	frames   *bufio.Reader
	lastUsed time.Time
	busy     bool
}

// startSession creates the session's container and waits for the kernel's
// ready frame; on failure nothing of it is left.
func (s *Sandbox) startSession(ctx context.Context, id string, p SessionProgram) (*session, error) {
	nonce := newNonce()
	plan := s.plan(Program{Image: p.Image, Python: p.Python, Workspace: p.Workspace}, "kernel", nonce)
	plan.Labels = s.owner.Labels("session")
	plan.Labels[LabelSession] = id
	cfg, host := ContainerConfig(plan)
	k, err := s.eng.StartAttached(ctx, engine.Spec{Name: s.owner.ContainerName("session"), Config: cfg, Host: host,
		Stderr: &logWriter{log: s.log, session: id}})
	if err != nil {
		return nil, s.explain(err)
	}
	ss := &session{id: id, image: p.Image, python: p.Python, workspace: p.Workspace, created: time.Now(),
		kernel: k, frames: bufio.NewReaderSize(k.Stdout, 64<<10)}
	if err := ss.awaitReady(ctx, s.log, nonce); err != nil {
		return nil, fmt.Errorf("session kernel did not start: %w", err)
	}
	ss.lastUsed = time.Now() // idle from now: a slow start must not count against the TTL
	return ss, nil
}

// awaitReady waits for the kernel's ready frame, destroying the container
// when it does not come.
func (ss *session) awaitReady(ctx context.Context, log *slog.Logger, nonce string) error {
	got := make(chan error, 1)
	go func() {
		f, err := readFrame(ss.frames)
		if err == nil && (f.kind != "ready" || f.nonce != nonce) {
			err = fmt.Errorf("%w: expected ready, got %s", errFraming, f.kind)
		}
		got <- err
	}()
	timer := time.NewTimer(probeTimeout)
	defer timer.Stop()
	var err error
	select {
	case err = <-got:
		if err == nil {
			return nil
		}
		ss.destroy(ctx, log)
		return err
	case <-timer.C:
		err = errors.New("no ready frame within a minute")
	case <-ctx.Done():
		err = context.Cause(ctx)
	}
	ss.destroy(ctx, log) // ends the stream, and so the reader
	<-got
	return err
}

// errTimedOut: the program ran past its deadline and the kernel was killed.
var errTimedOut = errors.New("the program timed out")

// turnEnd is how an exchange with the kernel ended.
type turnEnd struct {
	code int   // the done frame's exit status
	err  error // the kernel died, or broke the protocol
}

// run sends one program and collects its output until done, the deadline,
// the kernel's death or ctx's end. A non-nil lost says why the container is
// gone; err is the caller's cancellation.
func (ss *session) run(ctx context.Context, log *slog.Logger, p SessionProgram, timeout time.Duration, stdout, stderr io.Writer) (res Result, lost, err error) {
	req := newRequest(p)
	start := time.Now()
	done := make(chan turnEnd, 1)
	// Sending is part of the turn: a kernel that stopped reading must not
	// hold the call past its deadline.
	go func() { done <- ss.exchange(req, stdout, stderr) }()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	collected := false
	select {
	case end := <-done:
		collected = true
		res.ExitCode, lost = end.code, end.err
		if lost != nil { // the kernel died or broke the protocol: the program's result, not ours
			ss.died(log, &res, lost, stderr)
		}
	case <-timer.C:
		res.TimedOut, res.ExitCode, lost = true, 137, errTimedOut
	case <-ctx.Done():
		err = context.Cause(ctx)
		lost = err
	}
	res.Duration, res.Timeout = time.Since(start), timeout
	if lost == nil {
		return res, nil, nil
	}
	ss.destroy(ctx, log) // and with it the exchange's stream
	if !collected {
		<-done
	}
	return res, lost, err
}

func newRequest(p SessionProgram) kernelRequest {
	req := kernelRequest{Nonce: newNonce(), Code: p.Code, Filename: p.Filename}
	if p.Outputs != "" {
		req.Outputs = WorkspaceMount + "/" + p.Outputs
	}
	if p.Stdin != nil {
		req.Stdin = *p.Stdin
	}
	return req
}

// exchange sends req and relays its frames until its done frame.
func (ss *session) exchange(req kernelRequest, stdout, stderr io.Writer) turnEnd {
	if _, err := ss.kernel.Write(req.encode()); err != nil {
		return turnEnd{err: fmt.Errorf("send to session kernel: %w", err)}
	}
	code, err := ss.collect(req.Nonce, stdout, stderr)
	return turnEnd{code: code, err: err}
}

// died records in res how the kernel ended a turn on its own.
func (ss *session) died(log *slog.Logger, res *Result, why error, stderr io.Writer) {
	log.Warn("session kernel ended", "session_id", ss.id, "err", why)
	if errors.Is(why, errFraming) {
		// It still runs, so there is no exit to wait for: we kill it.
		fmt.Fprintf(stderr, "\npybox: the session was discarded: %v\n", why)
		res.ExitCode = 137
		return
	}
	ss.exitInto(res) // read how it exited before removing it
}

// exitInto records how the kernel's container ended, waiting briefly for
// the daemon to report its exit.
func (ss *session) exitInto(res *Result) {
	select {
	case <-ss.kernel.Done():
		x := ss.kernel.Exit()
		res.ExitCode, res.OOMKilled = x.Code, x.OOMKilled
	case <-time.After(teardownWait):
	}
}

// exited reports how the kernel's container ended, if it has.
func (ss *session) exited() (engine.Exit, bool) {
	select {
	case <-ss.kernel.Done():
		return ss.kernel.Exit(), true
	default:
		return engine.Exit{}, false
	}
}

// collect relays out and err frames until the done frame of nonce. Output
// frames of earlier requests are relayed too: threads that outlive their
// program print between calls, under that program's nonce.
func (ss *session) collect(nonce string, stdout, stderr io.Writer) (int, error) {
	for {
		f, err := readFrame(ss.frames)
		if err != nil {
			return 0, err
		}
		switch {
		case f.kind == "out":
			stdout.Write(f.payload) // capped writers never fail
		case f.kind == "err":
			stderr.Write(f.payload) // idem
		case f.kind == "done" && f.nonce == nonce:
			return doneStatus(f.payload)
		default:
			return 0, fmt.Errorf("%w: unexpected %s frame", errFraming, f.kind)
		}
	}
}

// destroy removes the container; safe to call more than once.
func (ss *session) destroy(ctx context.Context, log *slog.Logger) {
	if err := ss.kernel.Destroy(ctx); err != nil {
		log.Error("session container not removed", "session_id", ss.id, "err", err)
	}
}
