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

// start creates the session's container and waits for the kernel's ready frame.
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
		kernel: k, frames: bufio.NewReaderSize(k.Stdout, 64<<10), lastUsed: time.Now()}
	if err := ss.awaitReady(ctx, nonce); err != nil {
		ss.destroy(ctx, s.log)
		return nil, fmt.Errorf("session kernel did not start: %w", err)
	}
	return ss, nil
}

func (ss *session) awaitReady(ctx context.Context, nonce string) error {
	got := make(chan error, 1)
	go func() {
		f, err := readFrame(ss.frames, nonce)
		if err == nil && f.kind != "ready" {
			err = fmt.Errorf("%w: expected ready, got %s", errFraming, f.kind)
		}
		got <- err
	}()
	select {
	case err := <-got:
		return err
	case <-time.After(probeTimeout):
		return errors.New("no ready frame within a minute")
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// run sends one program and collects its output until done, the deadline,
// the kernel's death or ctx's end. lost reports that the container is gone.
func (ss *session) run(ctx context.Context, log *slog.Logger, p SessionProgram, timeout time.Duration, stdout, stderr io.Writer) (res Result, lost bool, err error) {
	nonce := newNonce()
	req := kernelRequest{Nonce: nonce, Code: p.Code, Filename: p.Filename}
	if p.Outputs != "" {
		req.Outputs = WorkspaceMount + "/" + p.Outputs
	}
	if p.Stdin != nil {
		req.Stdin = *p.Stdin
	}
	start := time.Now()
	if _, err := ss.kernel.Write(req.encode()); err != nil {
		return res, true, fmt.Errorf("send to session kernel: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- ss.collect(nonce, &res, stdout, stderr) }()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	collected := false
	select {
	case err = <-done:
		collected = true
		if err != nil { // the kernel died or broke the protocol: the program's result, not ours
			log.Warn("session kernel ended", "session_id", ss.id, "err", err)
			err, lost = nil, true
		}
	case <-timer.C:
		res.TimedOut, lost = true, true
	case <-ctx.Done():
		lost, err = true, context.Cause(ctx)
	}
	res.Duration, res.Timeout = time.Since(start), timeout
	if !lost {
		return res, false, nil
	}
	if collected {
		ss.exitInto(&res) // it died on its own: read how before removing it
	}
	// The container goes, and with it the collector's stream.
	ss.destroy(ctx, log)
	if !collected {
		<-done
	}
	if res.TimedOut {
		res.ExitCode = 137
	}
	return res, true, err
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

// collect relays out/err frames until the done frame of nonce.
func (ss *session) collect(nonce string, res *Result, stdout, stderr io.Writer) error {
	for {
		f, err := readFrame(ss.frames, nonce)
		if err != nil {
			return err
		}
		switch f.kind {
		case "out":
			stdout.Write(f.payload) // capped writers never fail
		case "err":
			stderr.Write(f.payload) // idem
		case "done":
			res.ExitCode, err = doneStatus(f.payload)
			return err
		default:
			return fmt.Errorf("%w: unknown frame kind %q", errFraming, f.kind)
		}
	}
}

// destroy removes the container; safe to call more than once.
func (ss *session) destroy(ctx context.Context, log *slog.Logger) {
	if err := ss.kernel.Destroy(ctx); err != nil {
		log.Error("session container not removed", "session_id", ss.id, "err", err)
	}
}
