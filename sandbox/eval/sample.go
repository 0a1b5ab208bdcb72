package eval

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/pybox-dev/pybox/images"
)

// MaxLine bounds one line of `pybox eval` input (and of a results file
// read back to resume).
const MaxLine = 16 << 20

// Sample is one program of a batch, as read from its line. A Go harness
// may build samples itself: ID and Code are required, the rest optional.
type Sample struct {
	Line         int             `json:"-"` // its line in the batch (0: not read from a file)
	ID           json.RawMessage `json:"id"`
	Code         *string         `json:"code"`
	Test         *string         `json:"test"`
	Stdin        *string         `json:"stdin"`
	TimeoutS     *float64        `json:"timeout_s"`
	Environment  string          `json:"environment"`
	Requirements []string        `json:"requirements"`
	// Cases make the sample a stdin/stdout suite: the program runs once
	// per case, in a fresh sandbox each, and passes when every run ends
	// with status 0 and prints the case's expected output (cases.go).
	Cases []Case `json:"cases"`
	// Task is the problem the sample answers (--problems): pass@k groups
	// samples by it.
	Task string `json:"-"`

	raw json.RawMessage // the sample's own line (--problems: results keep its fields)

	key     string        // the id's compact JSON: what resume matches on
	timeout time.Duration // 0: the batch's default
	envKey  string        // the environment it runs in (environment + canonical requirements)
}

// InputError is bad input (the samples, or a results file to resume),
// naming the line: `pybox eval` exits with status 2.
type InputError struct {
	Where string // "line 12", "results file r.jsonl, line 3"
	Msg   string
}

func (e *InputError) Error() string { return e.Where + ": " + e.Msg }

// ReadSamples reads and checks every line of a batch before anything
// runs: blank lines are skipped; any other must be a JSON object with a
// unique id (string or number) and a code string. Fields it does not
// know are ignored (datasets carry their own metadata).
func ReadSamples(r io.Reader, maxTimeout time.Duration, maxCode int64) ([]*Sample, error) {
	var out []*Sample
	seen := map[string]int{}
	err := eachLine(r, func(n int, line []byte, _ int64, _ bool) error {
		where := fmt.Sprintf("line %d", n)
		s := &Sample{Line: n}
		if err := strictObject(line, s); err != nil {
			return &InputError{where, err.Error()}
		}
		key, err := idKey(s.ID)
		if err != nil {
			return &InputError{where, err.Error()}
		}
		if first, dup := seen[key]; dup {
			return &InputError{where, fmt.Sprintf("id %s was already used on line %d: ids must be unique", key, first)}
		}
		seen[key] = n
		s.key = key
		if err := s.check(maxTimeout, maxCode); err != nil {
			return &InputError{where, fmt.Sprintf("sample %s: %v", key, err)}
		}
		out = append(out, s)
		return nil
	})
	return out, err
}

// strictObject decodes a JSON object into v, with a clear message for a
// line that is not one.
func strictObject(line []byte, v any) error {
	if t := bytes.TrimSpace(line); len(t) == 0 || t[0] != '{' {
		return errors.New("not a JSON object (each line is one sample: {\"id\": ..., \"code\": ...})")
	}
	if err := json.Unmarshal(line, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return fmt.Errorf("field %q must be %s, not a JSON %s", te.Field, jsonKind(te.Type.Kind().String()), te.Value)
		}
		return fmt.Errorf("not valid JSON: %v", err)
	}
	return nil
}

// jsonKind names a Go kind as the JSON type a sample's field must have.
func jsonKind(k string) string {
	switch k {
	case "string":
		return "a string"
	case "float64", "float32", "int", "int64":
		return "a number"
	case "slice":
		return "a list of strings"
	case "ptr":
		return "a string or number"
	}
	return "of another type"
}

// idKey is an id's compact JSON, for a string or a number id.
func idKey(id json.RawMessage) (string, error) {
	if len(id) == 0 || string(id) == "null" {
		return "", errors.New(`"id" is missing: every sample needs a unique id (string or number)`)
	}
	var v any
	if err := json.Unmarshal(id, &v); err != nil {
		return "", err
	}
	switch v.(type) {
	case string, float64:
	default:
		return "", fmt.Errorf(`"id" must be a string or a number, not %s`, id)
	}
	var b bytes.Buffer
	if err := json.Compact(&b, id); err != nil {
		return "", err
	}
	return b.String(), nil
}

func (s *Sample) check(maxTimeout time.Duration, maxCode int64) error {
	switch {
	case s.Code == nil:
		return errors.New(`"code" is missing (the program to run, a string)`)
	case int64(len(*s.Code)) > maxCode:
		return fmt.Errorf(`"code" is %d bytes, over the limit of %d (--max-code-size)`, len(*s.Code), maxCode)
	case s.Test != nil && int64(len(*s.Test)) > maxCode:
		return fmt.Errorf(`"test" is %d bytes, over the limit of %d (--max-code-size)`, len(*s.Test), maxCode)
	case s.Stdin != nil && int64(len(*s.Stdin)) > maxCode:
		return fmt.Errorf(`"stdin" is %d bytes, over the limit of %d (--max-code-size)`, len(*s.Stdin), maxCode)
	}
	for _, f := range []struct {
		name string
		v    *string
	}{{"code", s.Code}, {"test", s.Test}} {
		if f.v != nil && strings.ContainsRune(*f.v, 0) {
			return fmt.Errorf(`"%s" holds a NUL character, which Python source cannot`, f.name)
		}
	}
	if s.TimeoutS != nil {
		t := *s.TimeoutS
		if math.IsNaN(t) || t <= 0 {
			return fmt.Errorf(`"timeout_s" must be a positive number of seconds, not %v`, t)
		}
		if d := time.Duration(t * float64(time.Second)); t > maxTimeout.Seconds() || d < time.Millisecond {
			return fmt.Errorf(`"timeout_s" %v is outside 0.001..%v seconds (--max-timeout)`, t, maxTimeout.Seconds())
		} else {
			s.timeout = d
		}
	}
	if err := checkCases(s.Cases, maxCode); err != nil {
		return err
	}
	switch s.Environment {
	case "", images.VariantBase, images.VariantDatascience:
	default:
		return fmt.Errorf(`"environment" %q is not a runtime variant: use %q or %q (or leave it out for the configured environment)`,
			s.Environment, images.VariantBase, images.VariantDatascience)
	}
	if slices.Contains(s.Requirements, "") {
		return errors.New(`"requirements" holds an empty string`)
	}
	return nil
}

// eachLine calls f with each non-blank line of r (numbered from 1, at
// most MaxLine bytes long, without its line ending), the offset
// just past it, and whether a newline ended it.
func eachLine(r io.Reader, f func(n int, line []byte, end int64, terminated bool) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var offset int64
	for n := 1; ; n++ {
		raw, err := readBoundedLine(br)
		if errors.Is(err, errLongLine) {
			return &InputError{fmt.Sprintf("line %d", n), fmt.Sprintf("longer than %d MiB", MaxLine>>20)}
		}
		offset += int64(len(raw))
		terminated := bytes.HasSuffix(raw, []byte("\n"))
		line := bytes.TrimSuffix(bytes.TrimSuffix(raw, []byte("\n")), []byte("\r"))
		if len(bytes.TrimSpace(line)) > 0 {
			if ferr := f(n, line, offset, terminated); ferr != nil {
				return ferr
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read: %w", err)
		}
	}
}

var errLongLine = errors.New("line too long")

// readBoundedLine reads one line, with its newline if it has one, of at most
// MaxLine bytes; io.EOF comes with the last line.
func readBoundedLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(line)+len(chunk) > MaxLine+2 {
			return nil, errLongLine
		}
		line = append(line, chunk...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return line, err
	}
}

// OpenSamples opens the batch: a file, or "-" for stdin.
func OpenSamples(path string, stdin io.Reader) (io.ReadCloser, error) {
	if path == "-" {
		return io.NopCloser(stdin), nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read the samples: %w", err)
	}
	return f, nil
}
