package eval

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/pybox-dev/pybox/sandbox"
)

// Result is the verdict on one sample: one line of `pybox eval` output.
type Result struct {
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
	// status), timeout, oom, resource_limit, quota, requirements, policy.
	Error string `json:"error,omitempty"`
	// Exception is the type of the exception whose traceback ends stderr
	// (AssertionError, ...), when it does: a hint, read from the
	// program's own output.
	Exception string `json:"exception,omitempty"`
	Message   string `json:"message,omitempty"` // what pybox has to say about it
	// Verdict and Cases: a stdin/stdout suite's overall verdict and its
	// cases' (passed, wrong answer, runtime error, timeout, oom).
	Verdict string       `json:"verdict,omitempty"`
	Cases   []CaseResult `json:"cases,omitempty"`
}

// Error classes of Result.Error.
const (
	ErrorExit          = "exit"
	ErrorTimeout       = "timeout"
	ErrorOOM           = "oom"
	ErrorResourceLimit = "resource_limit"
	ErrorQuota         = "quota"
	ErrorRequirements  = "requirements"
	ErrorPolicy        = "policy"
	ErrorWrongAnswer   = "wrong_answer" // a case of a stdin/stdout suite printed something else
)

// verdictOf fills r from how the program ended. Passed is exactly: the
// program (and its tests) ended with status 0, in time, within its
// memory, processes and workspace quota, as the runner's supervisor saw
// it (with tests: only after the worker attested that they ran to their
// end, see images/runner).
func verdictOf(r Result, res sandbox.Result) Result {
	r.ExitCode, r.TimedOut, r.OOMKilled = res.ExitCode, res.TimedOut, res.OOMKilled
	r.DurationMS = res.Duration.Milliseconds()
	r.Stdout, r.Stderr, r.Truncated = res.Stdout, res.Stderr, res.Truncated
	switch {
	case res.Violation != nil:
		r.Error, r.ExitCode, r.Message = ErrorPolicy, -1, res.Violation.Explain()
	case res.TimedOut:
		r.Error, r.Message = ErrorTimeout, fmt.Sprintf("killed at its time limit of %s", res.Timeout)
	case res.OOMKilled:
		r.Error, r.Message = ErrorOOM, "ran out of memory and was killed"
	case res.ResourceKilled:
		r.Error, r.Message = ErrorResourceLimit, "its sandbox was killed for passing a resource limit (processes)"
	case res.QuotaExceeded:
		r.Error, r.Message = ErrorQuota, res.QuotaNote
	case res.ExitCode != 0:
		r.Error = ErrorExit
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

// Tally counts results by verdict.
type Tally struct {
	Passed, Failed, TimedOut, OOM, Other int
}

// Add counts r.
func (t *Tally) Add(r Result) {
	switch {
	case r.Passed:
		t.Passed++
	case r.Error == ErrorTimeout:
		t.TimedOut++
	case r.Error == ErrorOOM:
		t.OOM++
	case r.Error == ErrorExit || r.Error == ErrorWrongAnswer:
		t.Failed++
	default:
		t.Other++
	}
}

// Total is the number of results counted.
func (t Tally) Total() int { return t.Passed + t.Failed + t.TimedOut + t.OOM + t.Other }
