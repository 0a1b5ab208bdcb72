package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/pybox-dev/pybox/images"
	"github.com/pybox-dev/pybox/sandbox"
	"github.com/pybox-dev/pybox/sandbox/eval"
)

// Exit statuses of `pybox eval`.
const (
	evalBadInput    = 2   // the samples (or the results file to resume) are not valid: the line is named
	evalInterrupted = 130 // Ctrl-C or SIGTERM: the results written so far are valid, run again to resume
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

// evalSettings are the settings `pybox eval` uses (its --help lists
// only these): the sandbox's limits, its image and environment, installs,
// the policy and the state directory; not the server's.
var evalSettings = []string{
	"image", "variant", "runtime", "backend", "k8s-namespace", "kubeconfig",
	"timeout", "max-timeout", "memory", "cpus", "pids", "output-limit", "workspace-quota",
	"max-concurrent", "warm-pool", "max-code-size", "policy", "log-level",
	"debian-mirror", "build", "env-type", "venv-path", "uv-venv-path", "conda-env-name", "python-path",
	"preinstalled-packages", "index-url", "extra-index-url", "wheelhouse", "install-network", "install-timeout",
	"state-dir", "allow-url-requirements", "allow-sdist",
}

// evalFlags are eval's own flags.
type evalFlags struct {
	out, progress string
	jobs          int
}

func evalCmd(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	c := &config{only: evalSettings}
	fs := newFlags("eval", evalUsage, stderr, c)
	usage := fs.Usage
	fs.Usage = func() { fmt.Fprint(stderr, evalHelp); usage() }
	var f evalFlags
	fs.StringVar(&f.out, "o", "", "results file (JSON Lines); run again with the same file to resume (default: stdout, not resumable)")
	fs.IntVar(&f.jobs, "j", 0, "samples run at once (default: --max-concurrent)")
	fs.StringVar(&f.progress, "progress", "auto", "progress bar on stderr: auto (when stderr is a terminal), always, never")
	if err := parse(fs, c, args); err != nil {
		return exitCodeOr(err, stderr, exitFailure)
	}
	if fs.NArg() != 1 || f.jobs < 0 || !slices.Contains([]string{"auto", "always", "never"}, f.progress) {
		fs.Usage()
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
	return evalRun(ctx, c, b, eval.Options{Jobs: f.jobs, Log: stderr}, stderr)
}

// evalBatch reads the batch and
// opens its results; nil and the exit status on an error.
func evalBatch(c *config, f *evalFlags, path string, maxCode int64, stdin io.Reader, stdout, stderr io.Writer) (*eval.Batch, int) {
	samples, err := evalSamples(c, path, maxCode, stdin)
	if err != nil {
		fmt.Fprintln(stderr, "pybox eval:", err)
		return nil, evalBadInput
	}
	b := eval.NewBatch(samples, stderr, f.progress)
	if err := b.OpenResults(f.out, stdout); err != nil {
		fmt.Fprintln(stderr, "pybox eval:", err)
		if errors.As(err, new(*eval.InputError)) {
			return nil, evalBadInput
		}
		return nil, exitFailure
	}
	return b, 0
}

// evalSamples reads the samples.
func evalSamples(c *config, path string, maxCode int64, stdin io.Reader) ([]*eval.Sample, error) {
	in, err := eval.OpenSamples(path, stdin)
	if err != nil {
		return nil, err
	}
	defer in.Close()
	return eval.ReadSamples(in, c.MaxTimeout, maxCode)
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
	n, err := c.codeLimit()
	return int64(n), err
}

// evalRun starts pybox and runs the batch's samples still to do.
func evalRun(ctx context.Context, c *config, b *eval.Batch, opts eval.Options, stderr io.Writer) int {
	if len(b.Todo()) == 0 {
		b.Summary(nil)
		return 0
	}
	a, err := newApp(c, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "pybox eval:", err)
		return exitFailure
	}
	defer a.Close()
	// A batch stopped while the daemon was away left containers it could
	// not remove; the next pybox on the same state directory removes them.
	if n, err := a.sandbox.ReapOrphans(ctx); err != nil {
		a.log.Warn("could not look for leftover containers", "err", err)
	} else if n > 0 {
		fmt.Fprintf(stderr, "pybox eval: removed %d containers left by an earlier pybox on this state directory\n", n)
	}
	if err := a.start(ctx, false); err != nil {
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
type evalBackend struct{ a *app }

func (e evalBackend) Canonical(reqs []string) ([]string, error) { return e.a.envs.Canonical(reqs) }

func (e evalBackend) Environment(ctx context.Context, variant string) (images.Environment, error) {
	if variant == "" {
		return e.a.envs.Active(), nil
	}
	want := e.a.cfg.initialEnv()
	want.Variant, want.BaseImage = variant, ""
	return e.a.envs.Configure(ctx, want)
}

func (e evalBackend) Install(ctx context.Context, env images.Environment, reqs []string) (images.InstallResult, error) {
	return e.a.inst.Install(ctx, env, reqs)
}

func (e evalBackend) Guard(code string) (*sandbox.Guard, error) { return e.a.cfg.guard(code) }

func (e evalBackend) Run(ctx context.Context, p sandbox.Program) (sandbox.Result, error) {
	return e.a.sandbox.Run(ctx, p)
}
