package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Action     string
	Package    string
	ImportPath string
	Test       string
	Elapsed    float64
	Output     string
}

// timing is the elapsed time of a package or a top-level test.
type timing struct {
	Name    string
	Action  string
	Seconds float64
}

// renderer prints what plain `go test` prints and collects timings.
type renderer struct {
	w        io.Writer
	live     bool
	outputs  map[string][]string // per package/test, until it passes
	packages []timing
	tests    []timing
	subtests int
	failures []string // "test: message" of each failed test, for the end
}

func newRenderer(w io.Writer, live bool) *renderer {
	return &renderer{w: w, live: live, outputs: map[string][]string{}}
}

func (r *renderer) line(b []byte) {
	var e event
	if err := json.Unmarshal(b, &e); err != nil || e.Action == "" {
		r.print(string(b) + "\n") // not an event: go's own message
		return
	}
	key := e.Package + " " + e.Test
	switch e.Action {
	case "build-output":
		r.print(e.Output)
	case "output":
		if e.Test == "" {
			r.packageOutput(e.Output)
			return
		}
		r.outputs[key] = append(r.outputs[key], e.Output)
	case "fail":
		r.record(e)
		if e.Test != "" {
			r.print(strings.Join(r.outputs[key], ""))
			r.failures = append(r.failures, failureLines(shortPackage(e.Package)+" "+e.Test, r.outputs[key])...)
		}
		delete(r.outputs, key)
	case "pass", "skip":
		r.record(e)
		delete(r.outputs, key)
	}
}

// packageOutput prints a package's own lines, leaving out the progress
// lines that only -v shows.
func (r *renderer) packageOutput(s string) {
	t := strings.TrimSpace(s)
	for _, p := range []string{"=== RUN", "=== PAUSE", "=== CONT", "=== NAME", "--- PASS", "--- SKIP"} {
		if strings.HasPrefix(t, p) {
			return
		}
	}
	if t == "PASS" {
		return
	}
	r.print(s)
}

func (r *renderer) record(e event) {
	switch {
	case e.Test == "":
		r.packages = append(r.packages, timing{e.Package, e.Action, e.Elapsed})
	case !strings.Contains(e.Test, "/"):
		name := fmt.Sprintf("%s %s", shortPackage(e.Package), e.Test)
		r.tests = append(r.tests, timing{name, e.Action, e.Elapsed})
	default:
		r.subtests++
	}
}

func (r *renderer) print(s string) {
	if r.live && s != "" {
		io.WriteString(r.w, s)
	}
}

func shortPackage(p string) string {
	return strings.TrimPrefix(p, "github.com/pybox-dev/pybox/")
}

// failureLines picks a failed test's own messages (t.Errorf, t.Fatalf:
// "    file_test.go:N: ..."), not the logs a test dumps under them, each cut
// to maxFailureLine bytes, at most maxFailureLines of them: what a reader
// of only the end of a long run's output needs first.
func failureLines(test string, output []string) []string {
	var out []string
	for _, l := range output {
		if !isTestMessage(l) {
			continue
		}
		if len(out) == maxFailureLines {
			out = append(out, test+": ...")
			break
		}
		msg := strings.TrimSpace(l)
		if len(msg) > maxFailureLine {
			msg = msg[:maxFailureLine] + "..."
		}
		out = append(out, test+": "+msg)
	}
	return out
}

const (
	maxFailureLines = 8
	maxFailureLine  = 400
)

// isTestMessage reports whether l is a test's message line: four spaces,
// then file.go:N: (a continuation of it, or of a dumped log, is indented
// further).
func isTestMessage(l string) bool {
	rest, ok := strings.CutPrefix(l, "    ")
	if !ok || strings.HasPrefix(rest, " ") {
		return false
	}
	file, after, ok := strings.Cut(rest, ".go:")
	if !ok || strings.ContainsAny(file, " \t") {
		return false
	}
	n := 0
	for n < len(after) && after[n] >= '0' && after[n] <= '9' {
		n++
	}
	return n > 0 && strings.HasPrefix(after[n:], ": ")
}
