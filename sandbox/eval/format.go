package eval

import (
	"encoding/json"
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
