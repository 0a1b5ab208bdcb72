package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/pybox-dev/pybox/internal/app"
	"github.com/pybox-dev/pybox/internal/storage"
	"github.com/pybox-dev/pybox/policies"
	"github.com/pybox-dev/pybox/sandbox"
)

// Exit statuses of `pybox run` besides the program's own.
const (
	exitTimeout = 124 // like timeout(1)
	exitFailure = 125 // pybox itself failed, like docker run
	exitPolicy  = 126 // the policy refused the program: nothing ran
)

// verdict is the --json output of `pybox run`.
type verdict struct {
	ExitCode   int    `json:"exit_code"`
	Stdout     string `json:"stdout"`
	Stderr     string `json:"stderr"`
	TimedOut   bool   `json:"timed_out"`
	OOMKilled  bool   `json:"oom_killed"`
	Truncated  bool   `json:"truncated"`
	DurationMS int64  `json:"duration_ms"`
	// Network is the egress proxy's report (runs with an allowlist).
	Network string `json:"network,omitempty"`
	// PolicyViolation is set when the policy's guardrails refused the
	// program: nothing of it ran.
	PolicyViolation *sandbox.Violation `json:"policy_violation,omitempty"`
}

func runCmd(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	c := commandConfig("run")
	fs := newFlags("run", "pybox run [flags] FILE|-", stderr, c)
	stdinFile := fs.String("stdin", "", "file fed to the program's standard input (default: none, so input() raises EOFError)")
	asJSON := fs.Bool("json", false, "print a JSON verdict (exit_code, stdout, stderr, timed_out, ...) instead of the program's streams")
	if err := parse(fs, c, args); err != nil {
		return exitCodeOr(err, stderr, exitFailure)
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return 2
	}
	code, input, err := readRunInputs(fs.Arg(0), *stdinFile, stdin)
	if err != nil {
		fmt.Fprintln(stderr, "pybox:", err)
		return exitFailure
	}
	res, err := runOnce(ctx, c, code, input, stderr)
	if errors.Is(err, policies.ErrViolation) { // a deny rule, checked before anything started
		res = sandbox.Result{ExitCode: -1, Violation: &sandbox.Violation{Rule: "deny",
			Detail: strings.TrimPrefix(err.Error(), policies.ErrViolation.Error()+": ")}}
	} else if err != nil {
		fmt.Fprintln(stderr, "pybox:", err)
		return exitFailure
	}
	return report(res, *asJSON, stdout, stderr)
}

// exitCodeOr maps a flag/config error to a status.
func exitCodeOr(err error, stderr io.Writer, fallback int) int {
	if code := exitCode(err, stderr); code != 1 {
		return code
	}
	return fallback
}

// readRunInputs reads the program (a path or "-" for stdin) and its stdin.
func readRunInputs(path, stdinFile string, stdin io.Reader) (code []byte, input *string, err error) {
	if path == "-" {
		code, err = io.ReadAll(stdin)
	} else {
		code, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read program: %w", err)
	}
	if stdinFile != "" {
		b, err := os.ReadFile(stdinFile)
		if err != nil {
			return nil, nil, fmt.Errorf("read --stdin file: %w", err)
		}
		s := string(b)
		input = &s
	}
	return code, input, nil
}

// runOnce runs code in the sandbox with a fresh, private workspace.
func runOnce(ctx context.Context, c *config, code []byte, input *string, stderr io.Writer) (sandbox.Result, error) {
	guard, err := c.Guard(string(code))
	if err != nil {
		return sandbox.Result{}, err
	}
	a, err := app.New(ctx, &c.Config, stderr)
	if err != nil {
		return sandbox.Result{}, err
	}
	defer a.Close()
	if err := a.Start(ctx, false); err != nil {
		return sandbox.Result{}, err
	}
	// The program comes with its request, and /workspace is the
	// container's own tmpfs: a private workspace, gone with the container,
	// and no host path (so pybox in a container needs no shared folder).
	source := string(code)
	env := a.Envs.Active()
	return a.Sandbox.Run(ctx, sandbox.Program{Image: env.Ref(), Python: env.RunPython(), File: storage.NewCodeName("main"), Source: &source, Stdin: input, Guard: guard})
}

// report prints the result and returns the exit status for it.
func report(res sandbox.Result, asJSON bool, stdout, stderr io.Writer) int {
	status := res.ExitCode
	switch {
	case res.TimedOut:
		status = exitTimeout
	case res.Violation != nil:
		status = exitPolicy
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(verdict{ExitCode: res.ExitCode, Stdout: res.Stdout, Stderr: res.Stderr, TimedOut: res.TimedOut,
			OOMKilled: res.OOMKilled, Truncated: res.Truncated, DurationMS: res.Duration.Milliseconds(), Network: res.Network, PolicyViolation: res.Violation}) // a failed write to stdout has nowhere to be reported
		return status
	}
	io.WriteString(stdout, res.Stdout)
	io.WriteString(stderr, res.Stderr)
	switch {
	case res.Violation != nil:
		fmt.Fprintln(stderr, "pybox:", res.Violation.Explain())
	case res.TimedOut:
		fmt.Fprintf(stderr, "pybox: timed out after %s; the program was killed\n", res.Timeout)
	case res.OOMKilled:
		fmt.Fprintln(stderr, "pybox: the program ran out of memory and was killed")
	}
	if res.Truncated {
		fmt.Fprintln(stderr, "pybox: output was truncated at the output cap")
	}
	if res.Network != "" {
		fmt.Fprintln(stderr, "pybox: network:", res.Network)
	}
	return status
}
