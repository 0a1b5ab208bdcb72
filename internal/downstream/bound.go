package downstream

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/docker/go-units"
)

// codeTooLarge is the JSON-RPC error code of a refused oversized message.
const codeTooLarge = -32000

// refusal is the JSON-RPC error pybox puts in place of a message of more
// than max bytes answering id.
func refusal(id json.RawMessage, max int) []byte {
	msg := fmt.Sprintf("its answer is over pybox's limit of %s for one message (set by PYBOX_MCP_MAX_RESULT); it was refused while being read", units.BytesSize(float64(max)))
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": codeTooLarge, "message": msg}})
	return b
}

// lineBound reads a command server's newline-delimited messages, each of
// at most max bytes kept. A longer one is read to its end without being
// kept and replaced by a refusal answering its id (found as it streams
// by), so only that call fails and the connection goes on (the SDK ends
// the whole connection past its own 16 MiB line limit).
type lineBound struct {
	pieces
	r   *bufio.Reader
	max int
}

// pieces is a Reader over whole pieces (lines, events) that pull makes one
// at a time; pull's error ends the stream after its piece.
type pieces struct {
	pull func() ([]byte, error)
	out  []byte // what Read returns next
	err  error  // after out
}

func (p *pieces) Read(b []byte) (int, error) {
	for len(p.out) == 0 {
		if p.err != nil {
			return 0, p.err
		}
		p.out, p.err = p.pull()
	}
	n := copy(b, p.out)
	p.out = p.out[n:]
	return n, nil
}

func newLineBound(r io.Reader, max int) *lineBound {
	b := &lineBound{r: bufio.NewReaderSize(r, 64<<10), max: max}
	b.pull = b.next
	return b
}

// next reads one line (with its newline); err is the stream's end or
// failure, after the line.
func (b *lineBound) next() ([]byte, error) {
	var line []byte
	for {
		chunk, err := b.r.ReadSlice('\n')
		if len(line)+len(chunk) > b.max {
			return b.refuse(line, chunk, err)
		}
		line = append(line, chunk...)
		if !errors.Is(err, bufio.ErrBufferFull) {
			return line, err
		}
	}
}

// refuse reads the rest of an oversized line, scanning it for its id, and
// returns the refusal in its place.
func (b *lineBound) refuse(head, chunk []byte, err error) ([]byte, error) {
	var sc idScanner
	sc.feed(head)
	sc.feed(chunk)
	for errors.Is(err, bufio.ErrBufferFull) {
		chunk, err = b.r.ReadSlice('\n')
		sc.feed(chunk)
	}
	if sc.id == nil { // not an answer (a notification, a request): dropped
		return nil, err
	}
	return append(refusal(sc.id, b.max), '\n'), err
}

// idScanner finds the "id" member of a JSON object streamed through feed,
// keeping nothing but that member's (bounded) value.
type idScanner struct {
	depth     int
	inStr     bool
	esc       bool
	wantKey   bool   // the next string at depth 1 is a member name
	inKey     bool   // reading a member name at depth 1
	key       []byte // the last member name at depth 1 (its first 8 bytes)
	capturing bool   // reading the value of "id"
	val       []byte
	id        json.RawMessage // the id, once read
}

func (s *idScanner) feed(p []byte) {
	for _, ch := range p {
		s.step(ch)
	}
}

func (s *idScanner) step(ch byte) {
	if s.capturing && (s.depth > 1 || s.inStr || (ch != ',' && ch != '}')) {
		if len(s.val) < 256 {
			s.val = append(s.val, ch)
		}
	}
	if s.inStr {
		s.strByte(ch)
		return
	}
	switch ch {
	case '"':
		s.inStr, s.inKey = true, s.depth == 1 && s.wantKey
		if s.inKey {
			s.key = s.key[:0]
		}
	case '{', '[':
		s.depth++
		s.wantKey = s.depth == 1 && ch == '{'
	case '}', ']':
		if s.depth == 1 {
			s.endValue()
		}
		s.depth--
	case ':':
		if s.depth == 1 {
			s.wantKey, s.capturing, s.val = false, string(s.key) == "id" && s.id == nil, s.val[:0]
		}
	case ',':
		if s.depth == 1 {
			s.endValue()
			s.wantKey = true
		}
	}
}

// strByte is one byte inside a string.
func (s *idScanner) strByte(ch byte) {
	switch {
	case s.esc:
		s.esc = false
	case ch == '\\':
		s.esc = true
	case ch == '"':
		s.inStr, s.inKey = false, false
		return
	}
	if s.inKey && len(s.key) < 8 {
		s.key = append(s.key, ch)
	}
}

// endValue ends a member's value at depth 1.
func (s *idScanner) endValue() {
	if !s.capturing {
		return
	}
	s.capturing = false
	v := bytes.TrimSpace(s.val)
	if len(v) > 0 && len(v) < 256 && json.Valid(v) && (v[0] == '"' || v[0] == '-' || (v[0] >= '0' && v[0] <= '9')) {
		s.id = bytes.Clone(v)
	}
}
