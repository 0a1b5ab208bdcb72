package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestFailuresAtTheEnd: a failed test's own messages (not the logs it
// dumps under them, nor a passing test's) come last, cut and bounded.
func TestFailuresAtTheEnd(t *testing.T) {
	stream := strings.Join([]string{
		`{"Action":"output","Package":"p/x","Test":"TestA","Output":"    a_test.go:12: want 3, got 4\n"}`,
		`{"Action":"output","Package":"p/x","Test":"TestA","Output":"        a dumped log line.go:1: not a message\n"}`,
		`{"Action":"output","Package":"p/x","Test":"TestA","Output":"    helpers_test.go:269: server stderr:\n"}`,
		`{"Action":"output","Package":"p/x","Test":"TestA","Output":"    a_test.go:13: ` + strings.Repeat("y", 500) + `\n"}`,
		`{"Action":"fail","Package":"p/x","Test":"TestA","Elapsed":1}`,
		`{"Action":"output","Package":"p/x","Test":"TestB","Output":"    b_test.go:5: a log of a passing test\n"}`,
		`{"Action":"pass","Package":"p/x","Test":"TestB","Elapsed":1}`,
	}, "\n")
	var out bytes.Buffer
	r := newRenderer(&out, true)
	for l := range strings.SplitSeq(stream, "\n") {
		r.line([]byte(l))
	}
	printFailures(&out, r.failures)
	_, end, ok := strings.Cut(out.String(), "== failures")
	if !ok {
		t.Fatalf("no failures section:\n%s", out.String())
	}
	want := []string{"p/x TestA: a_test.go:12: want 3, got 4", "p/x TestA: helpers_test.go:269: server stderr:",
		"p/x TestA: a_test.go:13: " + strings.Repeat("y", maxFailureLine-len("a_test.go:13: ")) + "..."}
	lines := strings.Split(strings.TrimSpace(end), "\n")[1:]
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("failures section:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	many := make([]string, 20)
	for i := range many {
		many[i] = "    a_test.go:1: x\n"
	}
	if got := failureLines("T", many); len(got) != maxFailureLines+1 || got[maxFailureLines] != "T: ..." {
		t.Errorf("20 messages gave %d lines, last %q; want %d and an ellipsis", len(got), got[len(got)-1], maxFailureLines+1)
	}
}
