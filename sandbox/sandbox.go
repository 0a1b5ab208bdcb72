package sandbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/pybox-dev/pybox/images"
	"github.com/pybox-dev/pybox/internal/contract"
	"github.com/pybox-dev/pybox/internal/egress"
	"github.com/pybox-dev/pybox/internal/engine"
	"github.com/pybox-dev/pybox/internal/storage"
)

// UnreachableError is a failure to reach the engine; its text says where
// pybox looked for it and what to do.
type UnreachableError = engine.UnreachableError

// Errors callers branch on.
var (
	// ErrBusy: every slot stayed taken for the whole queue wait.
	ErrBusy = errors.New("the sandbox is busy: too many programs are running; try again shortly")
	// ErrUnreachable: the Docker daemon did not answer.
	ErrUnreachable = engine.ErrUnreachable
	// ErrPermission: the daemon's socket is there but this user may not
	// use it (it comes with ErrUnreachable).
	ErrPermission = engine.ErrPermission
	// ErrDaemonLost: the connection to the daemon broke while a program
	// ran; its outcome is unknown and its container is removed once the
	// daemon answers again.
	ErrDaemonLost = errors.New("the connection to the Docker daemon broke while the program ran (was the daemon stopped or restarted?); " +
		"its outcome is unknown, and its container is removed once Docker answers again")
)

// Config configures a Sandbox. The zero value of each field means its default.
type Config struct {
	Engine  *engine.Client // Docker or Podman; this or Backend is required
	Backend Backend        // another backend (Kubernetes); wins over Engine
	Image   string         // default runtime image; default images.Tag("base")
	Runtime string         // OCI runtime (runc, crun, runsc); "" = daemon default
	User    string         // "uid:gid" programs run as, never root; default SandboxUser()
	// SharedUID makes every container run as User itself. By default, when
	// the server runs as root and User is the runtime image's user
	// (images.SandboxUser), or on a backend whose containers may run as any
	// uid (Kubernetes: pods share no host folder), each container runs as a
	// uid of its own, drawn from contract.SandboxUIDBase's range, in User's
	// group: the kernel charges processes (RLIMIT_NPROC), inotify instances
	// and pipe buffers per uid, so each sandbox then has its own budget.
	// The folders they share must then be the group's (storage.Dir.Share).
	// With another User (a regular user's storage, or a server that is not
	// root) Docker's containers run as User.
	SharedUID     bool
	Limits        Limits        // per-run limits; zero fields take defaults
	MaxConcurrent int           // programs running at once; default 4
	QueueWait     time.Duration // how long a run waits for a slot; default 30s
	MaxSessions   int           // live sessions at once; default 8
	SessionTTL    time.Duration // idle time after which a session ends; default 15 minutes
	WarmPool      int           // ready containers kept per environment at least (more under demand, up to 2×MaxConcurrent, at most 8); default 2, negative disables
	// RunsDir is a host directory that no container mounts, where each
	// stateless run gets its private output folder (see Outputs); "" = runs
	// get none. The Sandbox uses a subfolder of its own and removes it on Close.
	RunsDir string
	// StagingDir is a host directory that no quota counts, for the
	// instance's host-side work that containers mount read-only (an
	// install's wheelhouse copy and downloads; see TempDir). The Sandbox
	// uses a subfolder of its own, removed on Close and, when the instance
	// died, by the next ReapOrphans of its lease dir. "" = the system's
	// temporary folder, where a killed instance's files stay.
	StagingDir string
	// LeaseDir is the folder of lease files (e.g. <state dir>/owners): New
	// takes a lease there for this instance's life and labels its
	// containers with it, and ReapOrphans removes only the containers of
	// owners whose lease there is no longer held. "" = no lease: this
	// instance's containers carry no lease label (no reaper ever removes
	// them) and ReapOrphans removes nothing.
	LeaseDir string
	// StorageDirs are the owner's folders that count, with the output
	// folders of its runs under way, against its storage quota (see
	// Account): its code storage and its sessions folder. A workspace
	// outside them counts while programs run on it.
	StorageDirs []string
	// Egress is the network of every stateless run whose Program.Egress
	// is nil (see Program.Egress), and of every session (a proxy of its
	// own for its life); nil or an empty allowlist: none.
	Egress *egress.Config
	// EgressChannel carries the runs' egress over the runner's channel
	// (its stdin and stdout, internal/egressmux) instead of a unix socket
	// in a folder mounted into the container: for a daemon that cannot
	// mount the server's folders. Kubernetes always does so.
	EgressChannel bool
	// Filesystem, when set, keeps StorageDirs and RunsDir on one
	// filesystem of the owner's own, sized to its quota (internal/quotafs):
	// the kernel refuses writes past it, and the account is its usage (one
	// statfs) instead of a walk of the folders. nil: the folders are
	// measured by walking them.
	Filesystem Filesystem
	Log        *slog.Logger // nil discards
}

// Filesystem is the owner's storage kept on a filesystem of its own.
type Filesystem interface {
	// Usage is what the owner's folders hold (bytes allocated, entries).
	Usage() (storage.Usage, error)
	// HostDir is a folder on the host disk that holds the filesystem,
	// where the disk reserve is checked.
	HostDir() string
}

// Sandbox runs programs. Create it with New.
type Sandbox struct {
	cfg       Config
	eng       Backend
	slots     *semaphore.Weighted
	owner     Owner
	leases    leases
	log       *slog.Logger
	sess      *sessions
	pool      *pool
	runsDir   string     // RunsDir/<owner>: this instance's run output folders
	staging   string     // StagingDir/<owner>: its host-side work (TempDir)
	acct      *Account   // the owner's storage, all its folders together
	ownUIDs   bool       // each container runs as a uid of its own (Config.SharedUID)
	chargeMu  sync.Mutex // held by the open Charge (one copy-back at a time)
	closing   atomic.Bool
	shutdown  context.Context // cancelled by Shutdown: every call in flight ends
	stopAll   context.CancelFunc
	closeOnce sync.Once
	runners   runnerCache // the runner compiled by each image's interpreter
}

// New validates cfg, fills its defaults, takes the lease (with a LeaseDir;
// it may wait a moment for a reaper looking at the fresh lease file) and
// returns a Sandbox. Close releases it.
func New(cfg Config) (*Sandbox, error) {
	if cfg.Backend == nil && cfg.Engine != nil {
		cfg.Backend = Docker(cfg.Engine)
	}
	if cfg.Backend == nil {
		return nil, errors.New("sandbox: an engine client or a backend is required")
	}
	cfg.Image = orDefault(cfg.Image, images.Tag("base"))
	cfg.User = orDefault(cfg.User, SandboxUser())
	if uid, _, ok := strings.Cut(cfg.User, ":"); !ok || uid == "0" || uid == "root" {
		return nil, fmt.Errorf("sandbox: user %q: give a non-root uid:gid", cfg.User)
	}
	cfg.Limits = cfg.Limits.WithDefaults()
	cfg.MaxConcurrent = orDefault(cfg.MaxConcurrent, 4)
	cfg.QueueWait = orDefault(cfg.QueueWait, 30*time.Second)
	cfg.MaxSessions = orDefault(cfg.MaxSessions, 8)
	cfg.SessionTTL = orDefault(cfg.SessionTTL, 15*time.Minute)
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if err := cfg.Limits.Validate(); err != nil {
		return nil, fmt.Errorf("sandbox limits: %w", err)
	}
	if cfg.MaxConcurrent < 1 || cfg.QueueWait < 0 || cfg.MaxSessions < 1 || cfg.SessionTTL < time.Second {
		return nil, errors.New("sandbox: max concurrent and max sessions must be at least 1, queue wait not negative, session TTL at least 1s")
	}
	owner := NewOwner()
	held, err := takeLease(cfg.LeaseDir, &owner)
	if err != nil {
		return nil, err
	}
	s := &Sandbox{
		cfg: cfg, eng: cfg.Backend, log: cfg.Log,
		slots:   semaphore.NewWeighted(int64(cfg.MaxConcurrent)),
		owner:   owner,
		sess:    newSessions(cfg.MaxSessions, cfg.Log),
		leases:  held,
		ownUIDs: !cfg.SharedUID && (anyUIDs(cfg.Backend) || os.Geteuid() == 0 && cfg.User == images.SandboxUser),
	}
	if !s.ownUIDs {
		s.log.Info("every container runs as the same uid: it shares the kernel's per-uid budgets (inotify instances, pipe buffers) with the others and with host processes of that uid",
			"user", cfg.User)
	}
	if cfg.RunsDir != "" {
		s.runsDir = filepath.Join(cfg.RunsDir, s.owner.ID)
		if err := os.MkdirAll(s.runsDir, 0o700); err != nil {
			return nil, fmt.Errorf("sandbox: run output folders: %w", err)
		}
	}
	if cfg.StagingDir != "" {
		s.staging = filepath.Join(cfg.StagingDir, s.owner.ID)
	}
	s.acct = newAccount(cfg.Limits, s.log, cfg.Filesystem, append(slices.Clone(cfg.StorageDirs), s.runsDir)...)
	s.pool = newPool(max(orDefault(cfg.WarmPool, 2), 0), min(2*cfg.MaxConcurrent, poolCeiling),
		func(ctx context.Context, p Program) (*warm, error) { return s.startOnce(ctx, p, "pool") }, s.log)
	s.shutdown, s.stopAll = context.WithCancel(context.Background())
	s.sess.wg.Add(1)
	go s.reap()
	return s, nil
}

// Limits returns the limits in force (defaults applied).
func (s *Sandbox) Limits() Limits { return s.cfg.Limits }

// SessionTTL is how long an idle session lives.
func (s *Sandbox) SessionTTL() time.Duration { return s.cfg.SessionTTL }

// MaxSessions is the cap on live sessions.
func (s *Sandbox) MaxSessions() int { return s.cfg.MaxSessions }

// PoolReady is how many ready containers the warm pool holds, all
// environments together.
func (s *Sandbox) PoolReady() int { return s.pool.ready() }

// Upcoming tells the warm pool how many more stateless runs the caller
// will start (pybox eval: the runs of the samples it has not handed out
// yet), so that it starts no ready container past them: one started and
// never used costs as much as a run. Negative: unknown (the default);
// the pool then follows demand alone.
func (s *Sandbox) Upcoming(n int) { s.pool.setUpcoming(n) }

// Account is the owner's storage account: its folders against its quota.
func (s *Sandbox) Account() *Account { return s.acct }

// Image returns the default runtime image.
func (s *Sandbox) Image() string { return s.cfg.Image }

// Program is one thing to run.
type Program struct {
	Image  string   // "" = the sandbox's default image
	Python []string // interpreter argv; nil = the runtime venv's python
	// Runner is the runner as pybox hands it to the container at its
	// start (nil: images.RunnerFrame(), its source; images.CompiledRunner
	// for Image and Python).
	Runner    []byte
	Workspace string        // host directory mounted at /workspace (the code storage)
	File      string        // program path relative to Workspace
	Stdin     *string       // nil: no stdin, so input() raises EOFError at once
	Args      []string      // the program's sys.argv[1:]
	Timeout   time.Duration // 0 = Limits.Timeout
	// Source, when set, is the program itself, sent with the request: the
	// runner writes it to /workspace/File, then runs it. With Workspace ""
	// the container's /workspace is a private tmpfs of the workspace quota's
	// size (pybox eval: nothing on the host, warm containers fit any run).
	Source *string
	// Text, when set, is File's content as the caller read and checked it
	// (its guard saw these bytes): the runner runs them under File's name
	// and never opens File, so a program running beside cannot swap what
	// runs (new content, a symlink) between the check and the run.
	Text *string
	// Variables are bound as the program's globals before it runs (JSON
	// values as Python values).
	Variables map[string]any
	// Tools, when set, are the downstream MCP tools the program may call
	// (code mode: the pybox_tools module).
	Tools ToolCalls
	// Guard, when set, is checked by the runner's supervisor before the
	// program runs; a violation is Result.Violation, and nothing runs.
	Guard *Guard
	// Test, when set, is code run after File in its globals (pybox eval):
	// a SystemExit from File before it is a failure, and a failing test
	// ends the program at once with its status (see images/runner).
	Test *string
	// OnOutput, when set, sees every chunk of output as it arrives
	// ("stdout" or "stderr"); it must not block.
	OnOutput func(stream string, chunk []byte)
	// Egress, when set with a non-empty allowlist, is the run's network:
	// a proxy of its own (internal/egress) on a unix socket mounted in the
	// container, which still has no interface but loopback. Such a run
	// never uses the warm pool. Result.Network says what it reached.
	Egress *egress.Config
	// Prepare, when set, runs once the program has its slot, before its
	// workspace is measured for the quota and it starts; its error ends
	// the run. The caller saves the program's file here, so that a call
	// refused or still queued has written nothing.
	Prepare func() error
}

// scratch: p has no host folder; /workspace is the container's own tmpfs.
func (p Program) scratch() bool { return p.Workspace == "" && p.Source != nil }

// Result is how a program ended. A failing program is a Result, not an error.
type Result struct {
	ExitCode  int
	Stdout    string
	Stderr    string
	TimedOut  bool
	OOMKilled bool
	Truncated bool // stdout or stderr hit the output cap
	// DroppedBytes is how much output past the cap the runner read and
	// dropped in the container (it never reached the server).
	DroppedBytes int64
	// QuotaExceeded: the program took its workspace past the storage quota
	// (or the host disk down to its reserve) and was stopped; QuotaNote
	// says how far.
	QuotaExceeded bool
	QuotaNote     string
	// ResourceKilled: the container ended with status 2 without the
	// runner's verdict: its runtime killed the whole sandbox, which gVisor
	// does when a program passes the process limit.
	ResourceKilled bool
	// Network is the egress proxy's report of a run with an allowlist
	// ("allowed api.example.com:443 (2 connections, 14 KiB), refused ...";
	// "" when it reached nothing); Egress is the same, itemised.
	Network   string
	Egress    egress.Report
	Warm      bool       // a stateless run that took a ready container from the warm pool
	Violation *Violation // the policy's guardrails refused the program: nothing of it ran
	Duration  time.Duration
	Timeout   time.Duration // the limit that applied
	// Outputs is a stateless run's own output folder (nil without
	// Config.RunsDir); the caller reads it, then calls its Remove.
	Outputs     *Outputs
	OutputsNote string // why a stateless run had no output folder, when it had none
	// Sessions only:
	NewSession  bool   // the call started the session
	SessionLost bool   // the session's container died or was killed; its state is gone
	SessionNote string // why an earlier session of this id ended, when it did
}

// Run executes p in a fresh container (a ready one from the warm pool, or
// a new one) and removes it. Errors are infrastructure failures (ErrBusy,
// ErrUnreachable, missing image) or the caller's cancellation; the
// container is gone, or going, when Run returns either way. The result
// comes from the runner's verdict as soon as it has it; the container's
// removal goes on in the background (Close waits for it).
func (s *Sandbox) Run(ctx context.Context, p Program) (Result, error) {
	if p.Egress == nil {
		p.Egress = s.cfg.Egress
	}
	ctx, stop := s.bound(ctx)
	defer stop()
	if err := s.acquire(ctx); err != nil {
		return Result{}, err
	}
	defer s.slots.Release(1)
	if err := prepare(p.Prepare); err != nil {
		return Result{}, err
	}
	uncover, err := s.acct.admit(p.Workspace)
	if err != nil {
		return Result{}, err
	}
	defer uncover()
	w := s.pool.take(ctx, p)
	warm := w != nil
	defer s.pool.done(p, warm)
	if w == nil {
		if w, err = s.startOnce(ctx, p, "run"); err != nil {
			return Result{}, err
		}
	}
	net := w.net // the run's now: its proxy ends with the run
	w.net = nil
	defer net.close(s.log) // idempotent: the report is taken below
	if p.egress() {
		if err := net.serve(p.Egress); err != nil {
			s.pool.dropLater(w)
			return Result{}, s.explain(err)
		}
	}
	stopWatch := func() {}
	if p.Workspace != "" { // its outputs folder is under runsDir, counted too
		stopWatch = s.acct.watch(w.halt)
	}
	if w.outputs != nil {
		unskip := s.acct.skipMount(w.outputs.mountpoint)
		stop := stopWatch
		stopWatch = func() { stop(); unskip() }
	}
	res, err := s.runOnce(ctx, w, p)
	res.Warm = warm
	stopWatch()
	net.into(&res, s.log)
	if err == nil && !res.QuotaExceeded && p.Workspace != "" {
		if why := s.acct.fullNow(); why != nil {
			res.QuotaExceeded, res.QuotaNote = true, why.Error()
		}
	}
	if err != nil {
		res.Outputs.Remove()
		res.Outputs = nil
		return res, s.explain(err)
	}
	return res, nil
}

// runOnce runs p in w, whose container is then removed in the background.
func (s *Sandbox) runOnce(ctx context.Context, w *warm, p Program) (Result, error) {
	stdout := &capBuffer{max: s.cfg.Limits.OutputBytes, onWrite: streamHook(p.OnOutput, "stdout")}
	stderr := &capBuffer{max: s.cfg.Limits.OutputBytes, onWrite: streamHook(p.OnOutput, "stderr")}
	req := request{Nonce: newNonce(), File: WorkspaceMount + "/" + p.File, Code: p.Source, Text: bytesOf(p.Text), Stdin: p.Stdin, Args: p.Args, Test: p.Test, Guard: p.Guard.request(), Variables: p.Variables, Tools: toolNames(p.Tools), Cap: runnerCap(s.cfg.Limits)}
	if l, ok := s.eng.(lossyAtExit); ok {
		req.Linger = l.LossyAtExit()
	}
	if w.outputs != nil {
		req.Outputs = w.outputs.Path()
	}
	res, lost, err := w.turn(ctx, s.log, req, orDefault(p.Timeout, s.cfg.Limits.Timeout), stdout, stderr, p.Tools)
	if lost == nil && res.ExitCode == 137 && !w.oomKnown {
		w.exitInto(&res) // killed, and the runner's cgroup does not say by whom: Docker knows
	}
	res.Outputs, res.OutputsNote, w.outputs = w.outputs, w.outputsNote, nil // the caller's now
	s.acct.handOver(res.Outputs)
	s.pool.dropLater(w)
	var tout, terr bool
	res.Stdout, tout = stdout.result()
	res.Stderr, terr = stderr.result()
	res.Truncated = tout || terr || res.DroppedBytes > 0
	return res, err
}

// acquire takes a run slot, waiting at most QueueWait.
func (s *Sandbox) acquire(ctx context.Context) error {
	if s.closing.Load() {
		return errClosed
	}
	wctx, cancel := context.WithTimeout(ctx, s.cfg.QueueWait)
	defer cancel()
	if err := s.slots.Acquire(wctx, 1); err != nil {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		return ErrBusy
	}
	if s.closing.Load() { // Close is draining the slots: start nothing
		s.slots.Release(1)
		return errClosed
	}
	return nil
}

func prepare(f func() error) error {
	if f == nil {
		return nil
	}
	return f()
}

// bound returns ctx, also cancelled by Shutdown.
func (s *Sandbox) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(s.shutdown, func() { cancel(ErrShutdown) })
	return ctx, func() { stop(); cancel(nil) }
}

// ErrShutdown is the cause of the runs Shutdown cancelled.
var ErrShutdown = errors.New("the server is shutting down")

// Shutdown cancels every run, probe and session call in flight (their
// containers are killed and removed as on any cancellation) and makes
// later ones fail; it does not wait (Close does). Idempotent.
func (s *Sandbox) Shutdown() {
	s.closing.Store(true)
	s.stopAll()
}

// drainTimeout bounds how long Close waits for the runs in flight.
const drainTimeout = 30 * time.Second

// drain waits until no run or probe holds a slot (each removes its
// container before it releases its slot), at most drainTimeout.
func (s *Sandbox) drain() {
	ctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
	defer cancel()
	n := int64(s.cfg.MaxConcurrent)
	if err := s.slots.Acquire(ctx, n); err != nil {
		s.log.Warn("runs still in flight when the sandbox closed; the reaper removes what they leave", "waited", drainTimeout)
		return
	}
	s.slots.Release(n)
}

// plan builds the container plan for p with the runner in mode (once or
// kernel).
func (s *Sandbox) plan(p Program, mode string) Plan {
	python := p.Python
	if len(python) == 0 {
		python = []string{images.VenvPython}
	}
	image := orDefault(p.Image, s.cfg.Image)
	runner, learn := p.Runner, ""
	if len(runner) == 0 {
		runner, learn = s.runners.frame(image, python)
	}
	cmd := append(append(append([]string{}, python...), images.RunnerArgs()...), mode)
	env := map[string]string{
		"HOME": "/tmp", "LANG": "C.UTF-8", "PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1",
		"MPLBACKEND": "Agg", "MPLCONFIGDIR": "/tmp/matplotlib",
		"PATH":        defaultPath,
		"VIRTUAL_ENV": contract.VenvDir,
	}
	// An interpreter elsewhere (a conda env's, say) comes first on PATH, so
	// its programs' subprocesses find the same Python and tools.
	if dir := path.Dir(python[0]); path.IsAbs(python[0]) && !strings.Contains(":"+defaultPath+":", ":"+dir+":") {
		env["PATH"] = dir + ":" + defaultPath
	}
	plan := Plan{
		Image: image, Cmd: cmd, User: s.newUser(), Env: env,
		Workspace: p.Workspace, Scratch: p.scratch(), Runtime: s.cfg.Runtime,
		Stdin: true, Limits: s.cfg.Limits, Runner: runner, LearnRunner: learn,
	}
	plan.Labels = s.labels("run", plan)
	if s.ownUIDs {
		env["PYBOX_UMASK"] = "002" // what it writes stays writable by the next container, another uid of the group
	}
	if plan.Scratch {
		env["PYBOX_PRIVATE"] = "1" // nothing but its program writes /workspace: the runner imports lazily (see its LAZY)
	}
	return plan
}

// defaultPath is the PATH of every container.
const defaultPath = contract.Path

// explain turns engine errors into ones the caller can act on.
func (s *Sandbox) explain(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrShutdown) {
		return err
	}
	if errors.Is(err, engine.ErrUnreachable) || errors.Is(err, ErrDaemonLost) {
		return err
	}
	s.log.Error("sandbox run failed", "err", err)
	return fmt.Errorf("sandbox: %w", err)
}

func streamHook(f func(string, []byte), stream string) func([]byte) {
	if f == nil {
		return nil
	}
	return func(b []byte) { f(stream, b) }
}

// SandboxUser is the uid:gid programs run as: the server's own ids when it
// is not root (so files in the user's storage stay theirs), else the
// runtime image's unprivileged pybox user. Never root.
func SandboxUser() string {
	if uid := os.Geteuid(); uid > 0 {
		return fmt.Sprintf("%d:%d", uid, os.Getegid())
	}
	return images.SandboxUser
}
