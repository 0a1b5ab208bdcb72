package sandbox

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// errFraming: the kernel's stream did not parse; the session is discarded.
var errFraming = errors.New("session protocol error")

// kernelRequest is one program sent to a session's kernel.
type kernelRequest struct {
	Nonce    string `json:"nonce"`
	Code     string `json:"code"`
	Filename string `json:"filename"`
	Stdin    string `json:"stdin,omitempty"`
	Outputs  string `json:"outputs,omitempty"`
}

// encode frames a request: its length in decimal, a newline, the JSON.
func (r kernelRequest) encode() []byte {
	body, _ := json.Marshal(r) // strings always marshal
	return append([]byte(strconv.Itoa(len(body))+"\n"), body...)
}

// frame is one message from the kernel.
type frame struct {
	nonce   string // the request being served when it was sent
	kind    string // ready, out, err, done
	payload []byte
}

// maxFrame bounds one frame's payload (the kernel sends at most 64 KiB).
const maxFrame = 1 << 20

// maxHeader bounds a frame's header line; a real one is under 60 bytes.
const maxHeader = 256

// readFrame reads "PYBOX <nonce> <kind> <len>\n<payload>". It looks for the
// header's end only within r's buffer, so a stream that is not frames (say,
// a program writing to the protocol fd) is an error after a bounded read,
// not a line buffered without limit in the server's memory.
func readFrame(r *bufio.Reader) (frame, error) {
	line, err := r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) || len(line) > maxHeader {
		return frame{}, fmt.Errorf("%w: frame header too long", errFraming)
	}
	if err != nil {
		return frame{}, err
	}
	head := string(line)
	parts := strings.Fields(head)
	if len(parts) != 4 || parts[0] != "PYBOX" {
		return frame{}, fmt.Errorf("%w: bad frame header %.80q", errFraming, head)
	}
	n, err := strconv.Atoi(parts[3])
	if err != nil || n < 0 || n > maxFrame {
		return frame{}, fmt.Errorf("%w: bad frame length %q", errFraming, parts[3])
	}
	f := frame{nonce: parts[1], kind: parts[2], payload: make([]byte, n)}
	if _, err := io.ReadFull(r, f.payload); err != nil {
		return frame{}, err
	}
	return f, nil
}

// doneStatus decodes a done frame's exit status.
func doneStatus(payload []byte) (int, error) {
	var d struct {
		Code int `json:"code"`
	}
	if err := json.Unmarshal(payload, &d); err != nil {
		return 0, fmt.Errorf("%w: bad done frame", errFraming)
	}
	return d.Code, nil
}
