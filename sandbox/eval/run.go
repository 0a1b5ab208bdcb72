package eval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/pybox-dev/pybox/images"
	"github.com/pybox-dev/pybox/sandbox"
)

// Backend is what a batch needs of pybox: the environments samples run
// in, and a fresh sandbox per program. cmd/pybox wires it to an app.
type Backend interface {
	// Canonical checks requirements and returns them in canonical form.
	Canonical(reqs []string) ([]string, error)
	// Environment is the prepared environment of a runtime variant; ""
	// is the active one.
	Environment(ctx context.Context, variant string) (images.Environment, error)
	// Install installs requirements into env as a cached layer.
	Install(ctx context.Context, env images.Environment, reqs []string) (images.InstallResult, error)
	// Guard is the policy's check of a program's code (nil: none); an
	// error refuses it.
	Guard(code string) (*sandbox.Guard, error)
	// Run runs one program in a fresh sandbox.
	Run(ctx context.Context, p sandbox.Program) (sandbox.Result, error)
}

// upcomer is a Backend that can be told how many more programs it will
// be asked to run (its warm pool then starts no container past them).
type upcomer interface{ Upcoming(n int) }

// Options configure Run. The zero value (with a Backend) runs one sample
// at a time and reports nothing.
type Options struct {
	Backend Backend
	Jobs    int       // samples run at once (0: 1)
	Log     io.Writer // where the preparation of environments is reported (nil: nowhere)
	Compare Compare   // how a stdin/stdout case's output is compared (zero: exactly)
}

// Outcome is what running one sample gave: a Result, or Err when there
// is no verdict (pybox or Docker failed; a requirement that is not
// valid is an *InputError).
type Outcome struct {
	Sample *Sample
	Result Result
	Err    error
}

// Run runs samples, Jobs at a time, each in its own fresh sandbox, and
// sends their outcomes in input order on the channel it returns, which
// it closes at the end. The first Outcome with an Err is the last: an
// infrastructure failure (after one retry) stops the batch. Cancel ctx
// to stop early (the outcomes sent are whole; every container is
// removed). The caller reads the channel until it is closed.
func Run(ctx context.Context, samples []*Sample, opts Options) <-chan Outcome {
	out := make(chan Outcome)
	r := &runner{opts: opts, samples: samples, log: opts.Log}
	if r.log == nil {
		r.log = io.Discard
	}
	go func() {
		defer close(out)
		r.run(ctx, out)
	}()
	return out
}

// runner runs one call of Run.
type runner struct {
	opts    Options
	samples []*Sample
	log     io.Writer
	envs    map[string]preparedEnv
}

// preparedEnv is the environment a group of samples runs in, or why
// there is none.
type preparedEnv struct {
	env images.Environment
	err error
}

func (r *runner) run(ctx context.Context, out chan<- Outcome) {
	if err := r.canonical(); err != nil {
		out <- Outcome{Err: err}
		return
	}
	if err := r.prepare(ctx); err != nil {
		out <- Outcome{Err: err}
		return
	}
	if u, ok := r.opts.Backend.(upcomer); ok {
		defer u.Upcoming(-1) // unknown again, for whatever runs next on the backend
	}
	r.runAll(ctx, out)
}

// canonical checks each sample's requirements, in canonical form.
func (r *runner) canonical() error {
	for _, s := range r.samples {
		if s.key == "" { // built by a Go harness, not read by ReadSamples
			key, err := idKey(s.ID)
			if err != nil {
				return &InputError{fmt.Sprintf("line %d", s.Line), err.Error()}
			}
			s.key = key
		}
		if len(s.Requirements) == 0 {
			continue
		}
		canon, err := r.opts.Backend.Canonical(s.Requirements)
		if err != nil {
			return &InputError{fmt.Sprintf("line %d", s.Line), fmt.Sprintf("sample %s: \"requirements\": %v", s.key, err)}
		}
		s.Requirements = canon
	}
	return nil
}

// prepare makes the environment of every group of samples (runtime
// variant plus requirements) once, installing requirements as a cached
// layer. A group whose requirements cannot be installed gets that as its
// samples' verdict; Docker not answering stops the batch.
func (r *runner) prepare(ctx context.Context) error {
	r.envs = map[string]preparedEnv{}
	b := r.opts.Backend
	base, err := b.Environment(ctx, "")
	if err != nil {
		return err
	}
	for _, s := range r.samples {
		s.envKey = s.Environment + "\x00" + strings.Join(s.Requirements, "\x00")
		if _, ok := r.envs[s.envKey]; ok {
			continue
		}
		env := base
		var err error
		if s.Environment != "" && s.Environment != base.Variant {
			fmt.Fprintf(r.log, "pybox eval: preparing the %s environment\n", s.Environment)
			env, err = b.Environment(ctx, s.Environment)
		}
		if err == nil && len(s.Requirements) > 0 {
			env, err = r.install(ctx, env, s.Requirements)
		}
		if err != nil && (ctx.Err() != nil || errors.Is(err, sandbox.ErrUnreachable)) {
			return err
		}
		r.envs[s.envKey] = preparedEnv{env: env, err: err}
	}
	return nil
}

func (r *runner) install(ctx context.Context, env images.Environment, reqs []string) (images.Environment, error) {
	what := strings.Join(reqs, " ")
	fmt.Fprintf(r.log, "pybox eval: installing %s (once for every sample that asks for it; cached)\n", what)
	res, err := r.opts.Backend.Install(ctx, env, reqs)
	switch {
	case err != nil:
		fmt.Fprintf(r.log, "pybox eval: %s could not be installed; the samples that ask for it fail: %v\n", what, err)
	case res.Cached:
		fmt.Fprintf(r.log, "pybox eval: %s: a cached layer\n", what)
	default:
		fmt.Fprintf(r.log, "pybox eval: %s: installed in %.1f s\n", what, res.Duration.Seconds())
	}
	return res.Env, err
}

// outcome is what one worker gave for the sample at pos.
type outcome struct {
	pos int
	res Result
	err error // pybox or Docker failed: no verdict
}

// runAll runs the samples, j at a time, sending each outcome as soon as
// every one before it is sent. An infrastructure failure (after one
// retry) stops the batch, sent last.
func (r *runner) runAll(ctx context.Context, out chan<- Outcome) {
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	jobs := max(r.opts.Jobs, 1)
	window := make(chan struct{}, max(4*jobs, 32)) // results waiting for an earlier one, at most
	todo := make(chan int)
	done := make(chan outcome)
	var wg sync.WaitGroup
	wg.Go(func() { r.feed(runCtx, window, todo) })
	for range jobs {
		wg.Go(func() {
			for pos := range todo {
				res, err := r.runSample(runCtx, r.samples[pos])
				done <- outcome{pos, res, err}
			}
		})
	}
	go func() { wg.Wait(); close(done) }()

	pending := map[int]Result{}
	next := 0
	var fatal error
	for o := range done {
		if o.err != nil {
			if fatal == nil && runCtx.Err() == nil {
				s := r.samples[o.pos]
				fatal = fmt.Errorf("sample %s (line %d): %w", s.key, s.Line, o.err)
			}
			stop()
			continue
		}
		pending[o.pos] = o.res
		for fatal == nil {
			res, ok := pending[next]
			if !ok {
				break
			}
			delete(pending, next)
			out <- Outcome{Sample: r.samples[next], Result: res}
			next++
			<-window
		}
	}
	if fatal != nil {
		out <- Outcome{Err: fatal}
	}
}

// feed hands out the positions to run, no further than the window
// allows, telling the backend how many programs are still to come.
func (r *runner) feed(ctx context.Context, window chan struct{}, todo chan<- int) {
	defer close(todo)
	tell := func(int) {}
	if u, ok := r.opts.Backend.(upcomer); ok {
		tell = u.Upcoming
	}
	defer tell(0) // every sample handed out (or the batch stopped)
	left := 0     // programs of the samples not handed out yet: a case is one each
	for _, s := range r.samples {
		left += max(len(s.Cases), 1)
	}
	for pos, s := range r.samples {
		tell(left)
		left -= max(len(s.Cases), 1)
		select {
		case window <- struct{}{}:
		case <-ctx.Done():
			return
		}
		select {
		case todo <- pos:
		case <-ctx.Done():
			return
		}
	}
}

// runSample runs s in a fresh sandbox with a workspace of its own. An
// infrastructure failure is tried once more before it is an error.
func (r *runner) runSample(ctx context.Context, s *Sample) (Result, error) {
	res, err := r.runOnce(ctx, s)
	if err != nil && ctx.Err() == nil {
		select {
		case <-time.After(time.Second):
		case <-ctx.Done():
			return res, err
		}
		res, err = r.runOnce(ctx, s)
	}
	return res, err
}

func (r *runner) runOnce(ctx context.Context, s *Sample) (Result, error) {
	res := Result{ID: json.RawMessage(s.key)}
	pe := r.envs[s.envKey]
	if pe.err != nil {
		res.Error, res.ExitCode, res.Message = ErrorRequirements, -1, "the sample's environment could not be prepared: "+pe.err.Error()
		return res, nil
	}
	// No host folder: the program comes with its request and /workspace is
	// the container's own tmpfs, so no sample can see another's files and
	// any warm container fits any sample of the environment.
	// The policy applies to the sample's code (the test is the operator's).
	guard, err := r.opts.Backend.Guard(*s.Code)
	if err != nil {
		res.Error, res.ExitCode, res.Message = ErrorPolicy, -1, err.Error()+"; nothing ran"
		return res, nil
	}
	p := sandbox.Program{Image: pe.env.Ref(), Python: pe.env.RunPython(), File: "main.py", Source: s.Code,
		Stdin: s.Stdin, Test: s.Test, Timeout: s.timeout, Guard: guard}
	if len(s.Cases) > 0 {
		return r.runCases(ctx, res, p, s)
	}
	sr, err := r.opts.Backend.Run(ctx, p)
	if err != nil {
		return res, err
	}
	return verdictOf(res, sr), nil
}
