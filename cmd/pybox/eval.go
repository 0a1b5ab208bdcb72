package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pybox-dev/pybox/images"
	"github.com/pybox-dev/pybox/sandbox"
)

// Exit statuses of `pybox eval`.
const (
	evalBadInput    = 2   // the samples (or the results file to resume) are not valid: the line is named
	evalInterrupted = 130 // Ctrl-C or SIGTERM: the results written so far are valid, run again to resume
)

// evalResult is one line of `pybox eval` output.
type evalResult struct {
	ID         json.RawMessage `json:"id"`
	Passed     bool            `json:"passed"`
	ExitCode   int             `json:"exit_code"`
	TimedOut   bool            `json:"timed_out"`
	OOMKilled  bool            `json:"oom_killed"`
	DurationMS int64           `json:"duration_ms"`
	Stdout     string          `json:"stdout"`
	Stderr     string          `json:"stderr"`
	Truncated  bool            `json:"truncated,omitempty"`
	// Error classifies a sample that did not pass: exit (a non-zero exit
	// status), timeout, oom, resource_limit, quota, requirements.
	Error string `json:"error,omitempty"`
	// Exception is the type of the exception whose traceback ends stderr
	// (AssertionError, ...), when it does: a hint, read from the
	// program's own output.
	Exception string `json:"exception,omitempty"`
	Message   string `json:"message,omitempty"` // what pybox has to say about it
}

// Error classes of evalResult.Error.
const (
	evalExit          = "exit"
	evalTimeout       = "timeout"
	evalOOM           = "oom"
	evalResourceLimit = "resource_limit"
	evalQuota         = "quota"
	evalRequirements  = "requirements"
	evalPolicy        = "policy"
)

const evalUsage = "pybox eval [flags] SAMPLES.jsonl|-"

const evalHelp = `Runs every sample of a JSON Lines batch in its own fresh sandbox (the
isolation of execute_code) and writes one JSON result per sample, in input
order. A sample: {"id": "..." or N, "code": "...", "test": "..." (optional:
run after code, in its globals), "stdin": "...", "timeout_s": N,
"environment": "base"|"datascience", "requirements": ["pkg==1.0", ...]}.
A result: id, passed, exit_code, timed_out, oom_killed, duration_ms,
stdout, stderr (each cut at --output-limit, 64k unless set), truncated,
error (exit, timeout, oom, resource_limit, quota, requirements, policy:
the --policy refused the code, nothing ran), exception,
message. With -o, a batch interrupted and run again skips the ids already
in the file. Exit status: 0 when the batch ran (whatever the samples did),
2 on bad input (the line is named), 125 when pybox or Docker failed, 130
when interrupted.

`

func evalCmd(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	c := &config{}
	fs := newFlags("eval", evalUsage, stderr, c)
	usage := fs.Usage
	fs.Usage = func() { fmt.Fprint(stderr, evalHelp); usage() }
	outPath := fs.String("o", "", "results file (JSON Lines); run again with the same file to resume (default: stdout, not resumable)")
	jobs := fs.Int("j", 0, "samples run at once (default: --max-concurrent)")
	progress := fs.String("progress", "auto", "progress bar on stderr: auto (when stderr is a terminal), always, never")
	if err := parse(fs, c, args); err != nil {
		return exitCodeOr(err, stderr, exitFailure)
	}
	if fs.NArg() != 1 || *jobs < 0 || !slices.Contains([]string{"auto", "always", "never"}, *progress) {
		fs.Usage()
		return evalBadInput
	}
	e := &evaluator{stderr: stderr, start: time.Now()}
	if err := e.setup(c, *jobs); err != nil {
		fmt.Fprintln(stderr, "pybox eval:", err)
		return exitFailure
	}
	in, err := openSamples(fs.Arg(0), stdin)
	if err != nil {
		fmt.Fprintln(stderr, "pybox eval:", err)
		return evalBadInput
	}
	e.samples, err = readSamples(in, c.MaxTimeout, e.maxCode)
	in.Close()
	if err != nil {
		fmt.Fprintln(stderr, "pybox eval:", err)
		return evalBadInput
	}
	out, err := e.openResults(*outPath, stdout)
	if err != nil {
		fmt.Fprintln(stderr, "pybox eval:", err)
		if errors.As(err, new(*inputError)) {
			return evalBadInput
		}
		return exitFailure
	}
	defer out.Close()
	e.out = out
	e.bar = newProgressBar(stderr, *progress)
	return e.run(ctx, c)
}

// evaluator runs one batch.
type evaluator struct {
	stderr  io.Writer
	start   time.Time
	jobs    int
	maxCode int64
	samples []*sample
	todo    []*sample // those without a result yet
	out     io.WriteCloser
	bar     *progressBar
	tally   evalTally // every result in the output, earlier runs' included
	ran     int       // results written by this run

	a    *app
	envs map[string]preparedEnv
}

// preparedEnv is the environment a group of samples runs in, or why
// there is none.
type preparedEnv struct {
	env images.Environment
	err error
}

// setup applies eval's defaults to c: quieter logs, a smaller output
// cap, as many slots as samples at once, no queueing.
func (e *evaluator) setup(c *config, jobs int) error {
	if !c.given["log-level"] && os.Getenv("PYBOX_LOG_LEVEL") == "" {
		c.LogLevel = "warn" // the progress bar and the summary say what matters
	}
	if !c.given["output-limit"] && os.Getenv("PYBOX_OUTPUT_LIMIT") == "" {
		c.OutputLimit = "64k" // per stream and sample: thousands of them go into one file
	}
	e.jobs = jobs
	if e.jobs == 0 {
		e.jobs = c.MaxConcurrent
	}
	c.MaxConcurrent = max(e.jobs, 1)
	c.QueueWait = 24 * time.Hour // every sample waits its turn: a busy error would be pybox's own doing
	n, err := c.codeLimit()
	e.maxCode = int64(n)
	return err
}

// openResults opens where results go. A results file that exists is read
// back: the ids it has are not run again, a cut-off last line (the batch
// was killed mid-write) is dropped, and new results are appended.
func (e *evaluator) openResults(path string, stdout io.Writer) (io.WriteCloser, error) {
	e.todo = e.samples
	if path == "" || path == "-" {
		return nopWriteCloser{stdout}, nil
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("results file: %w", err)
	}
	done, keep, err := e.readResults(f, path)
	if err == nil {
		err = f.Truncate(keep)
	}
	if err == nil {
		_, err = f.Seek(keep, io.SeekStart)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	if len(done) > 0 {
		e.todo = nil
		for _, s := range e.samples {
			if !done[s.key] {
				e.todo = append(e.todo, s)
			}
		}
		fmt.Fprintf(e.stderr, "pybox eval: resuming %s: %d of %d samples have results, %d to run\n", path, len(e.samples)-len(e.todo), len(e.samples), len(e.todo))
	}
	return f, nil
}

// readResults reads a results file being resumed: which ids it has, and
// the length of its valid part (whole result lines). Only its last line
// may be cut off (the batch was killed while writing it): it is dropped.
func (e *evaluator) readResults(f *os.File, path string) (map[string]bool, int64, error) {
	inBatch := map[string]bool{}
	for _, s := range e.samples {
		inBatch[s.key] = true
	}
	done := map[string]bool{}
	var keep int64
	var bad *inputError
	err := eachLine(f, func(n int, line []byte, end int64, terminated bool) error {
		if bad != nil { // a bad line with more after it: not a cut-off last line
			return bad
		}
		var r evalResult
		key, err := "", strictObject(line, &r)
		if err == nil {
			key, err = idKey(r.ID)
		}
		if err == nil && !terminated {
			err = errors.New("no newline at its end")
		}
		if err != nil {
			bad = &inputError{fmt.Sprintf("results file %s, line %d", path, n), "not a pybox eval result (" + err.Error() + "); use another -o file"}
			return nil
		}
		if !inBatch[key] {
			return &inputError{fmt.Sprintf("results file %s, line %d", path, n), fmt.Sprintf("id %s is not in this batch: is the file another batch's results? use another -o file", key)}
		}
		if done[key] {
			return &inputError{fmt.Sprintf("results file %s, line %d", path, n), fmt.Sprintf("a second result for id %s: use another -o file", key)}
		}
		done[key] = true
		e.tally.add(r)
		keep = end
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	if bad != nil {
		fmt.Fprintf(e.stderr, "pybox eval: %s: its last line is cut off (the batch was stopped while writing it); dropped\n", path)
	}
	return done, keep, nil
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// run starts pybox, prepares the environments, runs the samples and
// reports.
func (e *evaluator) run(ctx context.Context, c *config) int {
	if len(e.todo) == 0 {
		e.summary(nil)
		return 0
	}
	a, err := newApp(c, e.stderr)
	if err != nil {
		fmt.Fprintln(e.stderr, "pybox eval:", err)
		return exitFailure
	}
	e.a = a
	defer a.Close()
	for _, s := range e.todo {
		if len(s.Requirements) == 0 {
			continue
		}
		canon, err := a.envs.Canonical(s.Requirements)
		if err != nil {
			fmt.Fprintf(e.stderr, "pybox eval: line %d: sample %s: \"requirements\": %v\n", s.Line, s.key, err)
			return evalBadInput
		}
		s.Requirements = canon
	}
	// A batch stopped while the daemon was away left containers it could
	// not remove; the next pybox on the same state directory removes them.
	if n, err := a.sandbox.ReapOrphans(ctx); err != nil {
		a.log.Warn("could not look for leftover containers", "err", err)
	} else if n > 0 {
		fmt.Fprintf(e.stderr, "pybox eval: removed %d containers left by an earlier pybox on this state directory\n", n)
	}
	if err := a.start(ctx, false); err != nil {
		fmt.Fprintln(e.stderr, "pybox eval:", err)
		return e.failed(ctx)
	}
	if err := e.prepare(ctx, c); err != nil {
		fmt.Fprintln(e.stderr, "pybox eval:", err)
		return e.failed(ctx)
	}
	return e.runAll(ctx)
}

// failed is the exit status for an error that stopped the batch.
func (e *evaluator) failed(ctx context.Context) int {
	if ctx.Err() != nil {
		return evalInterrupted
	}
	return exitFailure
}

// prepare makes the environment of every group of samples (runtime
// variant plus requirements) once, installing requirements as a cached
// layer. A group whose requirements cannot be installed gets that as its
// samples' verdict; Docker not answering stops the batch.
func (e *evaluator) prepare(ctx context.Context, c *config) error {
	e.envs = map[string]preparedEnv{}
	base := e.a.envs.Active()
	for _, s := range e.todo {
		s.envKey = s.Environment + "\x00" + strings.Join(s.Requirements, "\x00")
		if _, ok := e.envs[s.envKey]; ok {
			continue
		}
		env := base
		var err error
		if s.Environment != "" && s.Environment != base.Variant {
			want := c.initialEnv()
			want.Variant, want.BaseImage = s.Environment, ""
			fmt.Fprintf(e.stderr, "pybox eval: preparing the %s environment\n", s.Environment)
			env, err = e.a.envs.Configure(ctx, want)
		}
		if err == nil && len(s.Requirements) > 0 {
			fmt.Fprintf(e.stderr, "pybox eval: installing %s (once for every sample that asks for it; cached)\n", strings.Join(s.Requirements, " "))
			var res images.InstallResult
			res, err = e.a.inst.Install(ctx, env, s.Requirements)
			env = res.Env
			switch {
			case err != nil:
				fmt.Fprintf(e.stderr, "pybox eval: %s could not be installed; the samples that ask for it fail: %v\n", strings.Join(s.Requirements, " "), err)
			case res.Cached:
				fmt.Fprintf(e.stderr, "pybox eval: %s: a cached layer\n", strings.Join(s.Requirements, " "))
			default:
				fmt.Fprintf(e.stderr, "pybox eval: %s: installed in %.1f s\n", strings.Join(s.Requirements, " "), res.Duration.Seconds())
			}
		}
		if err != nil && (ctx.Err() != nil || errors.Is(err, sandbox.ErrUnreachable)) {
			return err
		}
		e.envs[s.envKey] = preparedEnv{env: env, err: err}
	}
	return nil
}

// outcome is what running one sample gave.
type outcome struct {
	pos int
	res evalResult
	err error // pybox or Docker failed: no verdict
}

// runAll runs the samples still to do, j at a time, writing each result
// as soon as every result before it is written. An infrastructure failure
// (after one retry) stops the batch: exit 125, the results before it
// written. Interrupted, every container is removed (the app's Close) and
// the file holds whole results only.
func (e *evaluator) runAll(ctx context.Context) int {
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	window := make(chan struct{}, max(4*e.jobs, 32)) // results waiting for an earlier one, at most
	jobs := make(chan int)
	done := make(chan outcome)
	var wg sync.WaitGroup
	go func() {
		defer close(jobs)
		for pos := range e.todo {
			select {
			case window <- struct{}{}:
			case <-runCtx.Done():
				return
			}
			select {
			case jobs <- pos:
			case <-runCtx.Done():
				return
			}
		}
	}()
	for range e.jobs {
		wg.Go(func() {
			for pos := range jobs {
				res, err := e.runSample(runCtx, e.todo[pos])
				done <- outcome{pos, res, err}
			}
		})
	}
	go func() { wg.Wait(); close(done) }()

	e.bar.start(len(e.samples), len(e.samples)-len(e.todo))
	pending := map[int]evalResult{}
	next := 0
	var fatal error
	var writeErr error
	for o := range done {
		if o.err != nil {
			if fatal == nil && runCtx.Err() == nil {
				fatal = fmt.Errorf("sample %s (line %d): %w", e.todo[o.pos].key, e.todo[o.pos].Line, o.err)
			}
			stop()
			continue
		}
		pending[o.pos] = o.res
		for {
			r, ok := pending[next]
			if !ok || fatal != nil || writeErr != nil {
				break
			}
			delete(pending, next)
			if writeErr = e.write(r); writeErr != nil {
				stop()
				break
			}
			next++
			<-window
		}
	}
	e.bar.finish()
	switch {
	case writeErr != nil:
		fmt.Fprintln(e.stderr, "pybox eval: writing results:", writeErr)
		e.summary(nil)
		return exitFailure
	case fatal != nil:
		fmt.Fprintln(e.stderr, "pybox eval: stopped: pybox could not run", fatal)
		e.summary(fatal)
		return exitFailure
	case ctx.Err() != nil:
		e.summary(ctx.Err())
		return evalInterrupted
	}
	e.summary(nil)
	return 0
}

// write appends one result line.
func (e *evaluator) write(r evalResult) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if _, err := e.out.Write(append(b, '\n')); err != nil {
		return err
	}
	e.tally.add(r)
	e.ran++
	e.bar.update(e.tally, e.ran)
	return nil
}

// runSample runs s in a fresh sandbox with a workspace of its own. An
// infrastructure failure is tried once more before it is an error.
func (e *evaluator) runSample(ctx context.Context, s *sample) (evalResult, error) {
	res, err := e.runOnce(ctx, s)
	if err != nil && ctx.Err() == nil {
		select {
		case <-time.After(time.Second):
		case <-ctx.Done():
			return res, err
		}
		res, err = e.runOnce(ctx, s)
	}
	return res, err
}

func (e *evaluator) runOnce(ctx context.Context, s *sample) (evalResult, error) {
	r := evalResult{ID: json.RawMessage(s.key)}
	pe := e.envs[s.envKey]
	if pe.err != nil {
		r.Error, r.ExitCode, r.Message = evalRequirements, -1, "the sample's environment could not be prepared: "+pe.err.Error()
		return r, nil
	}
	// No host folder: the program comes with its request and /workspace is
	// the container's own tmpfs, so no sample can see another's files and
	// any warm container fits any sample of the environment.
	// The policy applies to the sample's code (the test is the operator's).
	guard, err := e.a.cfg.guard(*s.Code)
	if err != nil {
		r.Error, r.ExitCode, r.Message = evalPolicy, -1, err.Error()+"; nothing ran"
		return r, nil
	}
	p := sandbox.Program{Image: pe.env.Ref(), Python: pe.env.RunPython(), File: "main.py", Source: s.Code,
		Stdin: s.Stdin, Test: s.Test, Timeout: s.timeout, Guard: guard}
	res, err := e.a.sandbox.Run(ctx, p)
	if err != nil {
		return r, err
	}
	return verdictOf(r, res), nil
}

// verdictOf fills r from how the program ended. Passed is exactly: the
// program (and its tests) ended with status 0, in time, within its
// memory, processes and workspace quota, as the runner's supervisor saw it.
func verdictOf(r evalResult, res sandbox.Result) evalResult {
	r.ExitCode, r.TimedOut, r.OOMKilled = res.ExitCode, res.TimedOut, res.OOMKilled
	r.DurationMS = res.Duration.Milliseconds()
	r.Stdout, r.Stderr, r.Truncated = res.Stdout, res.Stderr, res.Truncated
	switch {
	case res.Violation != nil:
		r.Error, r.ExitCode, r.Message = evalPolicy, -1, violationText(res.Violation)
	case res.TimedOut:
		r.Error, r.Message = evalTimeout, fmt.Sprintf("killed at its time limit of %s", res.Timeout)
	case res.OOMKilled:
		r.Error, r.Message = evalOOM, "ran out of memory and was killed"
	case res.ResourceKilled:
		r.Error, r.Message = evalResourceLimit, "its sandbox was killed for passing a resource limit (processes)"
	case res.QuotaExceeded:
		r.Error, r.Message = evalQuota, res.QuotaNote
	case res.ExitCode != 0:
		r.Error = evalExit
		r.Exception = lastException(res.Stderr)
	default:
		r.Passed = true
	}
	return r
}

// exceptionLine is the last line of a Python traceback: "pkg.Type: msg".
var exceptionLine = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)(?::|$)`)

// lastException names the exception that ends stderr: after a traceback,
// or a SyntaxError's report (which has no traceback header).
func lastException(stderr string) string {
	rest := strings.TrimRight(stderr, "\n")
	last := rest[strings.LastIndexByte(rest, '\n')+1:]
	m := exceptionLine.FindStringSubmatch(last)
	if m == nil {
		return ""
	}
	if strings.Contains(rest, "Traceback (most recent call last):\n") || strings.HasSuffix(m[1], "Error") {
		return m[1]
	}
	return ""
}

// evalTally counts results by verdict.
type evalTally struct {
	passed, failed, timedOut, oom, other int
}

func (t *evalTally) add(r evalResult) {
	switch {
	case r.Passed:
		t.passed++
	case r.Error == evalTimeout:
		t.timedOut++
	case r.Error == evalOOM:
		t.oom++
	case r.Error == evalExit:
		t.failed++
	default:
		t.other++
	}
}

func (t evalTally) total() int { return t.passed + t.failed + t.timedOut + t.oom + t.other }

// summary reports the batch on stderr; stopped is why it ended early.
func (e *evaluator) summary(stopped error) {
	t := e.tally
	wall := time.Since(e.start)
	rate := float64(e.ran) / wall.Seconds()
	fmt.Fprintf(e.stderr, "pybox eval: %d of %d samples have results (%d run now): %d passed, %d failed, %d timed out, %d out of memory, %d other errors; %.1f s, %.1f samples/s\n",
		t.total(), len(e.samples), e.ran, t.passed, t.failed, t.timedOut, t.oom, t.other, wall.Seconds(), rate)
	if stopped != nil {
		fmt.Fprintf(e.stderr, "pybox eval: stopped before the end (%v): the results file holds whole results only; run the same command again (with -o FILE) to go on\n", stopped)
	}
}
