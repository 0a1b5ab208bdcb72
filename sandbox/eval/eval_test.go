package eval

import (
	"strings"
	"testing"
	"time"

	"github.com/pybox-dev/pybox/sandbox"
)

func TestLastException(t *testing.T) {
	for _, tc := range []struct{ stderr, want string }{
		{"Traceback (most recent call last):\n  File \"<tests>\", line 1, in <module>\nAssertionError\n", "AssertionError"},
		{"Traceback (most recent call last):\n  File \"x\", line 1\nmod.sub.CustomThing: bad: worse\n", "mod.sub.CustomThing"},
		{"  File \"/workspace/main.py\", line 1\n    def (:\n        ^\nSyntaxError: invalid syntax\n", "SyntaxError"},
		{"just a line\n", ""},
		{"Warning: careful\n", ""},
		{"", ""},
		{"Traceback (most recent call last):\n  ...\nKeyError: 'k'\nthen the program printed more\n", ""},
	} {
		if got := lastException(tc.stderr); got != tc.want {
			t.Errorf("lastException(%q) = %q; want %q", tc.stderr, got, tc.want)
		}
	}
}

// TestVerdictOf: passed only for exit 0 that nothing stopped.
func TestVerdictOf(t *testing.T) {
	for _, tc := range []struct {
		res       sandbox.Result
		passed    bool
		errorKind string
	}{
		{sandbox.Result{}, true, ""},
		{sandbox.Result{ExitCode: 1}, false, ErrorExit},
		{sandbox.Result{ExitCode: 137, TimedOut: true, Timeout: time.Second}, false, ErrorTimeout},
		{sandbox.Result{ExitCode: 137, OOMKilled: true}, false, ErrorOOM},
		{sandbox.Result{ExitCode: 2, ResourceKilled: true}, false, ErrorResourceLimit},
		{sandbox.Result{ExitCode: 0, QuotaExceeded: true, QuotaNote: "over"}, false, ErrorQuota},
		{sandbox.Result{ExitCode: 0, TimedOut: true}, false, ErrorTimeout},
	} {
		r := verdictOf(Result{}, tc.res)
		if r.Passed != tc.passed || r.Error != tc.errorKind {
			t.Errorf("%+v: passed=%v error=%q; want %v %q", tc.res, r.Passed, r.Error, tc.passed, tc.errorKind)
		}
	}
}

func TestReadSamplesLines(t *testing.T) {
	in := "\n{\"id\": 1, \"code\": \"a\"}\r\n   \n{\"id\": \"x\", \"code\": \"b\", \"task_id\": \"HumanEval/0\", \"timeout_s\": 2.5}"
	got, err := ReadSamples(strings.NewReader(in), time.Minute, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Line != 2 || got[1].Line != 4 || got[1].key != `"x"` || got[1].timeout != 2500*time.Millisecond {
		t.Errorf("samples: %+v %+v", got[0], got[1])
	}
	long := `{"id": 1, "code": "` + strings.Repeat("x", MaxLine) + `"}`
	if _, err := ReadSamples(strings.NewReader(long), time.Minute, 1<<30); err == nil || !strings.Contains(err.Error(), "line 1: longer than") {
		t.Errorf("a line over the limit: %v", err)
	}
}
