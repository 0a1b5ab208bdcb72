package sandbox

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

// countingReader counts the bytes taken from it.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func frameBytes(nonce, kind, payload string) string {
	return fmt.Sprintf("PYBOX %s %s %d\n%s", nonce, kind, len(payload), payload)
}

// TestReadFrameBoundsHeader: a stream with no newline (say, a program that
// writes to the protocol fd) is a framing error after a bounded read, not a
// read that buffers whatever arrives in the server's memory.
func TestReadFrameBoundsHeader(t *testing.T) {
	src := &countingReader{r: io.LimitReader(neverNewline{}, 64<<20)}
	_, err := readFrame(bufio.NewReaderSize(src, 64<<10))
	if !errors.Is(err, errFraming) {
		t.Fatalf("err = %v; want a framing error", err)
	}
	if src.n > 1<<20 {
		t.Errorf("read %d bytes looking for a header; want it bounded", src.n)
	}
}

type neverNewline struct{}

func (neverNewline) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	return len(p), nil
}

func TestReadFrame(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    frame
		framing bool // want errFraming
	}{
		{"out", frameBytes("n1", "out", "hi\n"), frame{nonce: "n1", kind: "out", payload: []byte("hi\n")}, false},
		{"empty payload", frameBytes("n1", "ready", ""), frame{nonce: "n1", kind: "ready", payload: []byte{}}, false},
		{"not a frame", "hello world\n", frame{}, true},
		{"huge length", "PYBOX n1 out 99999999999\n", frame{}, true},
		{"negative length", "PYBOX n1 out -1\n", frame{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readFrame(bufio.NewReader(strings.NewReader(tt.in)))
			if tt.framing {
				if !errors.Is(err, errFraming) {
					t.Fatalf("err = %v; want a framing error", err)
				}
				return
			}
			if err != nil || got.nonce != tt.want.nonce || got.kind != tt.want.kind || !bytes.Equal(got.payload, tt.want.payload) {
				t.Errorf("got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
	if _, err := readFrame(bufio.NewReader(strings.NewReader("PYBOX n1 out 10\nshort"))); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("kernel died mid-frame: err = %v; want io.ErrUnexpectedEOF", err)
	}
}

// TestCollectRelaysLateOutput: output that threads of an earlier program
// wrote after its done frame carries that program's nonce; it belongs to
// the session's output, not to a protocol error. A done frame of another
// run is one.
func TestCollectRelaysLateOutput(t *testing.T) {
	stream := frameBytes("old", "out", "late ") + frameBytes("old", "err", "warn ") +
		frameBytes("cur", "out", "now\n") + frameBytes("cur", "done", `{"code": 3, "dropped": 5}`)
	ss := &conn{frames: bufio.NewReader(strings.NewReader(stream))}
	var stdout, stderr bytes.Buffer
	v, _, err := ss.collect("cur", &stdout, &stderr, nil)
	if code := v.Code; err != nil || code != 3 || v.Dropped != 5 || stdout.String() != "late now\n" || stderr.String() != "warn " {
		t.Errorf("collect = %+v, %v, stdout %q, stderr %q; want code 3, dropped 5, nil, %q, %q", v, err, stdout.String(), stderr.String(), "late now\n", "warn ")
	}
	ss = &conn{frames: bufio.NewReader(strings.NewReader(frameBytes("old", "done", `{"code": 0}`)))}
	if _, _, err := ss.collect("cur", &stdout, &stderr, nil); !errors.Is(err, errFraming) {
		t.Errorf("done frame of another run: err = %v; want a framing error", err)
	}
	// A policy frame of the current run ends it with the violation; a
	// malformed one, or another run's, is a framing error.
	ss = &conn{frames: bufio.NewReader(strings.NewReader(frameBytes("cur", "policy", `{"rule": "name_denied", "detail": "eval", "line": 3}`)))}
	if _, v, err := ss.collect("cur", &stdout, &stderr, nil); err != nil || v == nil || *v != (Violation{Rule: "name_denied", Detail: "eval", Line: 3}) {
		t.Errorf("policy frame: %+v, %v", v, err)
	}
	for _, bad := range []string{frameBytes("cur", "policy", `{}`), frameBytes("old", "policy", `{"rule": "x"}`)} {
		ss = &conn{frames: bufio.NewReader(strings.NewReader(bad))}
		if _, _, err := ss.collect("cur", &stdout, &stderr, nil); !errors.Is(err, errFraming) {
			t.Errorf("bad policy frame %q: err = %v; want a framing error", bad, err)
		}
	}
}
