package sandbox

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"
)

// SessionProgram is one program run in a session.
type SessionProgram struct {
	Image     string   // used only when the session starts
	Python    []string // idem
	Workspace string   // idem: host directory mounted at /workspace
	Code      string
	Filename  string        // shown in tracebacks, e.g. /workspace/code_1a2b.py
	Stdin     *string       // nil: input() raises EOFError
	Args      []string      // sys.argv[1:] while the program runs
	Timeout   time.Duration // 0 = Limits.Timeout
	OnOutput  func(stream string, chunk []byte)
	Prepare   func() error   // as Program.Prepare
	Guard     *Guard         // as Program.Guard
	Variables map[string]any // as Program.Variables: set in the session's globals first
	Tools     ToolCalls      // as Program.Tools

	// Private: Workspace is the session's own folder, removed when the
	// session is closed or expires (used only when the session starts).
	Private bool
	// MakeWorkspace, when set with Private, makes Workspace when the
	// session starts: after the start was admitted (a refused start makes
	// nothing) and after any earlier session of the id has ended and its
	// folder gone. A start that fails after it removes what it made.
	MakeWorkspace func() error

	// FollowImage restarts a live session whose image is not Image (say,
	// packages were installed since it started) before running; the
	// result's SessionNote says its variables were reset. Without it a
	// session keeps the image it started with.
	FollowImage bool
}

// session is one live kernel container.
type session struct {
	*conn
	id        string
	image     string
	python    []string
	workspace string
	outputs   *sessionOutputs // its private output area; nil = none
	noOutputs string          // why it has none, when it should (each turn's note)
	egress    *egressRun      // its egress proxy, for the session's life; nil = no network
	created   time.Time

	mu       sync.Mutex // guards the fields below
	lastUsed time.Time
	busy     bool
}

// startSession creates the session's container and waits for the runner's
// ready frame; on failure nothing of it is left.
func (s *Sandbox) startSession(ctx context.Context, id string, p SessionProgram) (*session, error) {
	plan := s.plan(Program{Image: p.Image, Python: p.Python, Workspace: p.Workspace}, "kernel")
	plan.Labels = s.labels("session", plan)
	plan.Labels[LabelSession] = id
	outputs, err := s.newSessionOutputs()
	noOutputs := ""
	if NoRoom(err) {
		// The owner's storage is full (a quota filesystem): the session
		// starts without its output area, as a stateless run then runs
		// without its output folder, and its turns say so.
		s.log.Warn("session output area unavailable", "session_id", id, "err", err)
		outputs, err, noOutputs = nil, nil, "figures and output files were not collected: the storage quota was full when this session started, so it has no output area"
	}
	if err != nil {
		return nil, err
	}
	if outputs != nil {
		plan.SessionOutputs = outputs.dir
	}
	net, err := s.startEgress(s.cfg.Egress)
	if err != nil {
		outputs.remove()
		return nil, err
	}
	plan.withEgress(net)
	c, err := s.start(ctx, plan, "session")
	if err == nil {
		if err = net.bind(c); err != nil {
			c.destroy(context.WithoutCancel(ctx), s.log)
		}
	}
	if err != nil {
		outputs.remove()
		net.close(s.log)
		return nil, fmt.Errorf("session kernel did not start: %w", err)
	}
	return &session{conn: c, id: id, image: p.Image, python: p.Python, workspace: p.Workspace, outputs: outputs, noOutputs: noOutputs,
		egress: net, created: time.Now(), lastUsed: time.Now()}, nil
}

// run sends one program to the kernel, with outputs (a folder of its
// output area; "" = none) as its output folder; see conn.turn.
func (ss *session) run(ctx context.Context, log *slog.Logger, p SessionProgram, outputs string, timeout time.Duration, outCap int, stdout, stderr io.Writer) (Result, error, error) {
	req := request{Nonce: newNonce(), Code: &p.Code, Filename: p.Filename, Stdin: p.Stdin, Args: p.Args, Guard: p.Guard.request(), Variables: p.Variables,
		Tools: toolNames(p.Tools), Cap: outCap}
	if outputs != "" {
		req.Outputs = SessionOutputsMount + "/" + outputs
	}
	return ss.turn(ctx, log, req, timeout, stdout, stderr, p.Tools)
}
