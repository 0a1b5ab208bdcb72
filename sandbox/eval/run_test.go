package eval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pybox-dev/pybox/images"
	"github.com/pybox-dev/pybox/sandbox"
)

// fakeBackend runs a "program" by reading how it should end from its
// source: "ok", "exit N", "timeout", "oom", "print TEXT", "slow"; anything
// else has no verdict (an infrastructure error).
type fakeBackend struct{}

func (fakeBackend) Canonical(reqs []string) ([]string, error) { return reqs, nil }
func (fakeBackend) Environment(context.Context, string) (images.Environment, error) {
	return images.Environment{}, nil
}
func (fakeBackend) Install(context.Context, images.Environment, []string) (images.InstallResult, error) {
	return images.InstallResult{}, nil
}
func (fakeBackend) Guard(string) (*sandbox.Guard, error) { return nil, nil }

func (fakeBackend) Run(ctx context.Context, p sandbox.Program) (sandbox.Result, error) {
	src := *p.Source
	if p.Stdin != nil { // a case: "IN=what;" says how the program ends on input IN
		_, rest, _ := strings.Cut(src, *p.Stdin+"=")
		src, _, _ = strings.Cut(rest, ";")
	}
	switch {
	case src == "ok":
		return sandbox.Result{}, nil
	case strings.HasPrefix(src, "exit "):
		var n int
		fmt.Sscan(src[5:], &n)
		return sandbox.Result{ExitCode: n}, nil
	case src == "timeout":
		return sandbox.Result{ExitCode: 137, TimedOut: true}, nil
	case src == "oom":
		return sandbox.Result{ExitCode: 137, OOMKilled: true}, nil
	case strings.HasPrefix(src, "print "):
		return sandbox.Result{Stdout: src[6:]}, nil
	case src == "slow":
		time.Sleep(30 * time.Millisecond)
		return sandbox.Result{}, nil
	}
	return sandbox.Result{}, errors.New("no verdict")
}

func sampleOf(id int, code string) *Sample {
	return &Sample{ID: json.RawMessage(fmt.Sprint(id)), Code: &code}
}

func collect(ch <-chan Outcome) []Outcome {
	var out []Outcome
	for o := range ch {
		out = append(out, o)
	}
	return out
}

// TestRunInOrder: outcomes come in input order whatever order they end in.
func TestRunInOrder(t *testing.T) {
	var samples []*Sample
	for i := range 40 {
		code := "ok"
		if i%3 == 0 {
			code = "slow"
		}
		if i%7 == 0 {
			code = "exit 1"
		}
		samples = append(samples, sampleOf(i, code))
	}
	got := collect(Run(context.Background(), samples, Options{Backend: fakeBackend{}, Jobs: 4}))
	if len(got) != 40 {
		t.Fatalf("%d outcomes", len(got))
	}
	for i, o := range got {
		if o.Err != nil || string(o.Result.ID) != fmt.Sprint(i) || o.Result.Passed != (i%7 != 0) {
			t.Errorf("outcome %d: %+v", i, o)
		}
	}
}

// TestRunStopsOnNoVerdict: a run without a verdict (tried twice) stops
// the batch: its error is the last outcome, never a pass.
func TestRunStopsOnNoVerdict(t *testing.T) {
	samples := []*Sample{sampleOf(0, "ok"), sampleOf(1, "broken"), sampleOf(2, "ok")}
	got := collect(Run(context.Background(), samples, Options{Backend: fakeBackend{}, Jobs: 1}))
	last := got[len(got)-1]
	if last.Err == nil || !strings.Contains(last.Err.Error(), "sample 1") {
		t.Fatalf("outcomes %+v; want the error of sample 1 last", got)
	}
	for _, o := range got[:len(got)-1] {
		if o.Sample == samples[1] || o.Err != nil {
			t.Errorf("an outcome for the broken sample or an early error: %+v", o)
		}
	}
}

// TestRunCases: per-case verdicts and the overall one (the first failing case's).
func TestRunCases(t *testing.T) {
	in := func(s string) *string { return &s }
	cases := []Case{{in("a"), in("3\n")}, {in("b"), in("10\n")}, {in("c"), in("0\n")}}
	for _, tc := range []struct {
		code, want, overall string
	}{
		{"a=print 3\n;b=print 10\n;c=print 0\n;", "passed,passed,passed", CasePassed},
		{"a=print 3\n;b=print 10\n;c=print x\n;", "passed,passed,wrong answer", CaseWrongAnswer},
		{"a=print 3\n;b=exit 3;c=print 0\n;", "passed,runtime error,passed", CaseRuntimeError},
		{"a=oom;b=timeout;c=print 0\n;", "oom,timeout,passed", CaseOOM},
		{"a=print 3 ;b=print 10\n;c=print 0\n;", "wrong answer,passed,passed", CaseWrongAnswer},
	} {
		s := sampleOf(1, tc.code)
		s.Cases = cases
		got := collect(Run(context.Background(), []*Sample{s}, Options{Backend: fakeBackend{}}))
		r := got[0].Result
		var v []string
		for _, c := range r.Cases {
			v = append(v, c.Verdict)
		}
		if strings.Join(v, ",") != tc.want || r.Verdict != tc.overall || r.Passed != (tc.overall == CasePassed) {
			t.Errorf("%q: cases %v, overall %q, passed %v; want %s, %q", tc.code, v, r.Verdict, r.Passed, tc.want, tc.overall)
		}
	}
	// tokens: spacing does not count.
	s := sampleOf(1, "a=print 3 ;b=print 10\n;c=print  0;")
	s.Cases = cases
	got := collect(Run(context.Background(), []*Sample{s}, Options{Backend: fakeBackend{}, Compare: Compare{Mode: "tokens"}}))
	if !got[0].Result.Passed {
		t.Errorf("tokens: %+v", got[0].Result)
	}
}

// upcomingBackend records what Run tells it of the programs still to come.
type upcomingBackend struct {
	fakeBackend
	mu   sync.Mutex
	told []int
}

func (b *upcomingBackend) Upcoming(n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.told = append(b.told, n)
}

// TestRunTellsUpcoming: a backend that can be told (the sandbox's warm
// pool) hears how many programs are still to come, a case counting as
// one each, down to 0 once every sample is handed out, then "unknown".
func TestRunTellsUpcoming(t *testing.T) {
	b := &upcomingBackend{}
	samples := []*Sample{sampleOf(0, "ok"), sampleOf(1, "ok"), sampleOf(2, "ok")}
	a, bb, x := "a", "b", "x"
	samples[1].Cases = []Case{{Stdin: &a, ExpectedStdout: &x}, {Stdin: &bb, ExpectedStdout: &x}}
	code := "a=print x;b=print x;"
	samples[1].Code = &code
	for _, o := range collect(Run(t.Context(), samples, Options{Backend: b, Jobs: 1})) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if want := []int{4, 3, 1, 0, -1}; !slices.Equal(b.told, want) {
		t.Errorf("told %v; want %v", b.told, want)
	}
}
