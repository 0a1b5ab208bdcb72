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
	kind    string // ready, out, err, done
	payload []byte
}

// maxFrame bounds one frame's payload (the kernel sends at most 64 KiB).
const maxFrame = 1 << 20

// readFrame reads "PYBOX <nonce> <kind> <len>\n<payload>" and checks the nonce.
func readFrame(r *bufio.Reader, nonce string) (frame, error) {
	head, err := r.ReadString('\n')
	if err != nil {
		return frame{}, err
	}
	parts := strings.Fields(head)
	if len(parts) != 4 || parts[0] != "PYBOX" {
		return frame{}, fmt.Errorf("%w: bad frame header %.80q", errFraming, head)
	}
	if parts[1] != nonce {
		return frame{}, fmt.Errorf("%w: frame for another run", errFraming)
	}
	n, err := strconv.Atoi(parts[3])
	if err != nil || n < 0 || n > maxFrame {
		return frame{}, fmt.Errorf("%w: bad frame length %q", errFraming, parts[3])
	}
	f := frame{kind: parts[2], payload: make([]byte, n)}
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
