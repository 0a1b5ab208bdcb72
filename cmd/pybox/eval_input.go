package main

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

// maxSampleLine bounds one line of `pybox eval` input (and of a results
// file read back to resume).
const maxSampleLine = 16 << 20

// sample is one program of a `pybox eval` batch, as read from its line.
type sample struct {
	Line         int             `json:"-"`
	ID           json.RawMessage `json:"id"`
	Code         *string         `json:"code"`
	Test         *string         `json:"test"`
	Stdin        *string         `json:"stdin"`
	TimeoutS     *float64        `json:"timeout_s"`
	Environment  string          `json:"environment"`
	Requirements []string        `json:"requirements"`

	key     string        // the id's compact JSON: what resume matches on
	timeout time.Duration // 0: the batch's default
	envKey  string        // the environment it runs in (environment + canonical requirements)
}

// inputError is bad `pybox eval` input: exit status 2, naming the line.
type inputError struct {
	where string // "line 12", "results file line 3"
	msg   string
}

func (e *inputError) Error() string { return e.where + ": " + e.msg }

// readSamples reads and checks every line of a batch before anything
// runs: blank lines are skipped; any other must be a JSON object with a
// unique id (string or number) and a code string. Fields it does not
// know are ignored (datasets carry their own metadata).
func readSamples(r io.Reader, maxTimeout time.Duration, maxCode int64) ([]*sample, error) {
	var out []*sample
	seen := map[string]int{}
	err := eachLine(r, func(n int, line []byte, _ int64, _ bool) error {
		where := fmt.Sprintf("line %d", n)
		s := &sample{Line: n}
		if err := strictObject(line, s); err != nil {
			return &inputError{where, err.Error()}
		}
		key, err := idKey(s.ID)
		if err != nil {
			return &inputError{where, err.Error()}
		}
		if first, dup := seen[key]; dup {
			return &inputError{where, fmt.Sprintf("id %s was already used on line %d: ids must be unique", key, first)}
		}
		seen[key] = n
		s.key = key
		if err := s.check(maxTimeout, maxCode); err != nil {
			return &inputError{where, fmt.Sprintf("sample %s: %v", key, err)}
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

func (s *sample) check(maxTimeout time.Duration, maxCode int64) error {
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
// most maxSampleLine bytes long, without its line ending), the offset
// just past it, and whether a newline ended it.
func eachLine(r io.Reader, f func(n int, line []byte, end int64, terminated bool) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var offset int64
	for n := 1; ; n++ {
		raw, err := readBoundedLine(br)
		if errors.Is(err, errLongLine) {
			return &inputError{fmt.Sprintf("line %d", n), fmt.Sprintf("longer than %d MiB", maxSampleLine>>20)}
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
// maxSampleLine bytes; io.EOF comes with the last line.
func readBoundedLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(line)+len(chunk) > maxSampleLine+2 {
			return nil, errLongLine
		}
		line = append(line, chunk...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return line, err
	}
}

// openSamples opens the batch: a file, or "-" for stdin.
func openSamples(path string, stdin io.Reader) (io.ReadCloser, error) {
	if path == "-" {
		return io.NopCloser(stdin), nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read the samples: %w", err)
	}
	return f, nil
}
