package eval

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/pybox-dev/pybox/sandbox"
)

// MaxCases bounds the cases of one sample: each is a sandbox run.
const MaxCases = 1000

// Case is one run of a stdin/stdout suite: the program reads Stdin and
// must print ExpectedStdout.
type Case struct {
	Stdin          *string `json:"stdin"`
	ExpectedStdout *string `json:"expected_stdout"`
}

// Verdicts of a case (CaseResult.Verdict, and Result.Verdict for a suite).
const (
	CasePassed       = "passed"
	CaseWrongAnswer  = "wrong answer"
	CaseRuntimeError = "runtime error"
	CaseTimeout      = "timeout"
	CaseOOM          = "oom"
)

// CaseResult is the verdict on one case.
type CaseResult struct {
	Verdict    string `json:"verdict"`
	ExitCode   int    `json:"exit_code"`
	DurationMS int64  `json:"duration_ms"`
}

func checkCases(cases []Case, maxCode int64) error {
	if len(cases) > MaxCases {
		return fmt.Errorf(`"cases": %d cases, over the limit of %d`, len(cases), MaxCases)
	}
	for i, c := range cases {
		switch {
		case c.ExpectedStdout == nil:
			return fmt.Errorf(`"cases"[%d]: "expected_stdout" is missing (a string)`, i)
		case c.Stdin != nil && int64(len(*c.Stdin)) > maxCode:
			return fmt.Errorf(`"cases"[%d]: "stdin" is %d bytes, over the limit of %d (--max-code-size)`, i, len(*c.Stdin), maxCode)
		case int64(len(*c.ExpectedStdout)) > maxCode:
			return fmt.Errorf(`"cases"[%d]: "expected_stdout" is %d bytes, over the limit of %d (--max-code-size)`, i, len(*c.ExpectedStdout), maxCode)
		}
	}
	return nil
}

// Compare is how a case's output is compared with the expected one.
type Compare struct {
	// Mode: "" or "exact" (byte for byte), "tokens" (the same
	// whitespace-separated tokens: spacing and line ends do not count),
	// "float" (tokens, where two numbers match within Tolerance).
	Mode string
	// Tolerance of "float": |a-b| <= Tolerance * max(1, |b|) (0: 1e-6).
	Tolerance float64
}

// ParseCompare reads --compare: exact, tokens, float or float:TOL.
func ParseCompare(s string) (Compare, error) {
	mode, tol, hasTol := strings.Cut(s, ":")
	c := Compare{Mode: mode}
	switch {
	case mode == "float" && hasTol:
		t, err := strconv.ParseFloat(tol, 64)
		if err != nil || !(t >= 0) || math.IsInf(t, 0) {
			return c, fmt.Errorf("--compare %s: the tolerance must be a number >= 0", s)
		}
		c.Tolerance = t
	case hasTol:
		return c, fmt.Errorf("--compare %s: only float takes a tolerance", s)
	case mode == "" || mode == "exact" || mode == "tokens" || mode == "float":
	default:
		return c, fmt.Errorf("--compare %q: use exact, tokens, float or float:TOLERANCE", s)
	}
	return c, nil
}

// Match tells whether got is the expected output.
func (c Compare) Match(got, want string) bool {
	switch c.Mode {
	case "tokens":
		return strings.Join(strings.Fields(got), " ") == strings.Join(strings.Fields(want), " ")
	case "float":
		g, w := strings.Fields(got), strings.Fields(want)
		if len(g) != len(w) {
			return false
		}
		for i := range g {
			if g[i] != w[i] && !c.near(g[i], w[i]) {
				return false
			}
		}
		return true
	}
	return got == want
}

func (c Compare) near(got, want string) bool {
	a, errA := strconv.ParseFloat(got, 64)
	b, errB := strconv.ParseFloat(want, 64)
	if errA != nil || errB != nil || math.IsNaN(a) || math.IsNaN(b) {
		return false
	}
	tol := c.Tolerance
	if tol == 0 {
		tol = 1e-6
	}
	return math.Abs(a-b) <= tol*max(1, math.Abs(b))
}

// runCases runs s once per case, each in a fresh sandbox (nothing a run
// leaves, a file or a process, can reach the next case), and gives the
// per-case verdicts and the overall one: passed when every case passed,
// else the first case that did not pass's verdict; the result's output is
// that case's.
func (r *runner) runCases(ctx context.Context, res Result, p sandbox.Program, s *Sample) (Result, error) {
	res.Passed, res.Verdict = true, CasePassed
	for i, c := range s.Cases {
		p.Stdin = c.Stdin
		sr, err := r.opts.Backend.Run(ctx, p)
		if err != nil {
			return res, err
		}
		v := verdictOf(Result{}, sr)
		cr := CaseResult{Verdict: caseVerdict(v, sr, *c.ExpectedStdout, r.opts.Compare), ExitCode: v.ExitCode, DurationMS: v.DurationMS}
		res.Cases = append(res.Cases, cr)
		res.DurationMS += cr.DurationMS
		if cr.Verdict != CasePassed && res.Passed {
			res.Passed, res.Verdict = false, cr.Verdict
			res.ExitCode, res.TimedOut, res.OOMKilled = v.ExitCode, v.TimedOut, v.OOMKilled
			res.Stdout, res.Stderr, res.Truncated = v.Stdout, v.Stderr, v.Truncated
			res.Error, res.Exception = v.Error, v.Exception
			if cr.Verdict == CaseWrongAnswer {
				res.Error = ErrorWrongAnswer
			}
			res.Message = fmt.Sprintf("case %d: %s", i, cr.Verdict)
			if v.Message != "" {
				res.Message += ": " + v.Message
			}
		}
	}
	return res, nil
}

// caseVerdict is one case's verdict: how the run ended, then (status 0)
// whether its whole output is the expected one.
func caseVerdict(v Result, sr sandbox.Result, want string, cmp Compare) string {
	switch {
	case v.Error == ErrorTimeout:
		return CaseTimeout
	case v.Error == ErrorOOM:
		return CaseOOM
	case !v.Passed:
		return CaseRuntimeError
	case sr.Truncated || !cmp.Match(sr.Stdout, want):
		return CaseWrongAnswer
	}
	return CasePassed
}
