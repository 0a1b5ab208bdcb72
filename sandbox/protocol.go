package sandbox

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// errFraming: the runner's stream did not parse; its container is discarded.
var errFraming = errors.New("runner protocol error")

// errAborted: the runner ended its worker because the program broke the
// worker's control pipe (a session program writing there); its container
// is discarded.
var errAborted = errors.New("the session was discarded")

// request is one program for the runner (images/runner): a file to run as
// __main__ (mode once) or code to execute in the session's globals (mode
// kernel). Nonce is the per-request secret the runner's supervisor tags
// its frames with; the program never sees it.
type request struct {
	Nonce     string         `json:"nonce"`
	File      string         `json:"file,omitempty"`
	Code      *string        `json:"code,omitempty"` // kernel: the program; once: written to File first
	Text      *[]byte        `json:"text,omitempty"` // once: File's content, run under its name without opening it
	Filename  string         `json:"filename,omitempty"`
	Stdin     *string        `json:"stdin"`          // nil: /dev/null (once) or empty (kernel)
	Args      []string       `json:"args,omitempty"` // sys.argv[1:]
	Test      *string        `json:"test,omitempty"` // once: tests run in the file's globals after it (pybox eval)
	Guard     *guardRequest  `json:"guard,omitempty"`
	Variables map[string]any `json:"variables,omitempty"` // bound as globals before the program runs
	Tools     []string       `json:"tools,omitempty"`     // code mode: the downstream tools the program may call (pybox_tools)
	Outputs   string         `json:"outputs,omitempty"`
	// Cap is how many bytes of each stream the runner frames for this
	// request; it reads the rest, counts it and drops it (the done
	// frame's "dropped"), so output past the cap never leaves the container.
	Cap int `json:"cap,omitempty"`
	// Linger (once): the supervisor waits for pybox to remove the
	// container after its verdict instead of exiting at once (backends
	// whose stream drops a container's last output when it exits).
	Linger bool `json:"linger,omitempty"`
}

// bytesOf is s's bytes (raw: the JSON carries them as base64, so a file
// that is not UTF-8 arrives as it was read); nil stays nil.
func bytesOf(s *string) *[]byte {
	if s == nil {
		return nil
	}
	b := []byte(*s)
	return &b
}

// runnerCap is the request's Cap under l: one byte past the output cap,
// so that a stream cut at the cap is seen as truncated even when no done
// frame comes to say how much was dropped (a program killed at its deadline).
func runnerCap(l Limits) int { return l.OutputBytes + 1 }

// encode frames a request: its length in decimal, a newline, the JSON.
func (r request) encode() []byte {
	body, _ := json.Marshal(r) // strings always marshal
	return append([]byte(strconv.Itoa(len(body))+"\n"), body...)
}

// netMessage frames a message of the egress channel (internal/egressmux)
// for the runner's stdin: "N", its length in decimal, a newline, the bytes.
func netMessage(msg []byte) []byte {
	head := "N" + strconv.Itoa(len(msg)) + "\n"
	return append(append(make([]byte, 0, len(head)+len(msg)), head...), msg...)
}

// frame is one message from the runner's supervisor.
type frame struct {
	nonce   string // the request being served when it was sent ("-" for ready)
	kind    string // ready, out, err, done
	payload []byte
}

// maxFrame bounds one frame's payload (the runner sends at most 64 KiB).
const maxFrame = 1 << 20

// maxHeader bounds a frame's header line; a real one is under 60 bytes.
const maxHeader = 256

// readFrame reads "PYBOX <nonce> <kind> <len>\n<payload>". It looks for the
// header's end only within r's buffer, so a stream that is not frames (say,
// a broken runner) is an error after a bounded read,
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

// guardRequest asks the runner's supervisor to check code against a
// policy's static guardrails before the worker gets the request.
type guardRequest struct {
	Rules any    `json:"rules"`
	Code  string `json:"code"`
}

// Guard is a policy's static guardrails for one program: Rules is their
// JSON form (policies.Guard), Code the program's text.
type Guard struct {
	Rules any
	Code  string
}

func (g *Guard) request() *guardRequest {
	if g == nil || g.Rules == nil {
		return nil
	}
	return &guardRequest{Rules: g.Rules, Code: g.Code}
}

// Violation is a program the guardrails refused: nothing of it ran.
type Violation struct {
	Rule   string `json:"rule"`
	Detail string `json:"detail"`
	Line   int    `json:"line"`
}

// Explain says why the guardrails refused a program.
func (v *Violation) Explain() string {
	where := "the program as a whole"
	if v.Line > 0 {
		where = fmt.Sprintf("line %d", v.Line)
	}
	return fmt.Sprintf("POLICY_VIOLATION: rule %s: %s (%s); nothing ran: the policy's guardrails refuse this program", v.Rule, v.Detail, where)
}

// policyViolation decodes a policy frame.
func policyViolation(payload []byte) (*Violation, error) {
	var v Violation
	if err := json.Unmarshal(payload, &v); err != nil || v.Rule == "" {
		return nil, fmt.Errorf("%w: bad policy frame %.80q", errFraming, payload)
	}
	return &v, nil
}

// ToolCalls answers a program's calls to downstream MCP tools (code mode):
// Names are the qualified tool names (SERVER.TOOL) the program may call,
// Call runs one (its error is shown to the program as an MCPToolError).
// A ToolCalls may also have a method Limit() int: how many calls one run
// may make (Call refuses those past it; default DefaultCallLimit). A turn
// that sends far more is ended (ErrToolFlood).
type ToolCalls interface {
	Names() []string
	Call(ctx context.Context, name string, args json.RawMessage) (any, error)
}

// toolCall is a program's call, as its runner relays it.
type toolCall struct {
	ID   json.RawMessage `json:"id"`
	Tool string          `json:"tool"`
	Args json.RawMessage `json:"args"`
}

// toolReply answers a toolCall; it goes to the runner framed as a request
// {"reply": ...}, which its supervisor hands to the program.
type toolReply struct {
	ID     json.RawMessage `json:"id"`
	Result any             `json:"result,omitempty"`
	Error  *string         `json:"error,omitempty"`
}

func (r toolReply) encode() []byte {
	body, err := json.Marshal(map[string]any{"reply": r})
	if err != nil { // a result that does not marshal: say so instead
		why := "the tool's result could not be encoded: " + err.Error()
		body, _ = json.Marshal(map[string]any{"reply": toolReply{ID: r.ID, Error: &why}})
	}
	return append([]byte(strconv.Itoa(len(body))+"\n"), body...)
}

// answer runs one call of the program and encodes the reply.
func answer(ctx context.Context, tools ToolCalls, payload []byte) []byte {
	var c toolCall
	if err := json.Unmarshal(payload, &c); err != nil || c.Tool == "" {
		why := "a tool call must be {\"id\", \"tool\", \"args\"}"
		return toolReply{ID: c.ID, Error: &why}.encode()
	}
	if tools == nil {
		why := "no downstream MCP tools are configured (PYBOX_MCP_SERVERS)"
		return toolReply{ID: c.ID, Error: &why}.encode()
	}
	res, err := tools.Call(ctx, c.Tool, c.Args)
	if err != nil {
		why := err.Error()
		return toolReply{ID: c.ID, Error: &why}.encode()
	}
	return toolReply{ID: c.ID, Result: res}.encode()
}

// toolNames is what the program is told it may call (nil: no pybox_tools).
func toolNames(t ToolCalls) []string {
	if t == nil {
		return nil
	}
	names := t.Names()
	if names == nil {
		names = []string{}
	}
	return names
}

// staleCall answers a call made by a program whose turn is over.
func staleCall(payload []byte) []byte {
	var c toolCall
	_ = json.Unmarshal(payload, &c) // the id, if any
	why := "the tool call came after its program ended (a thread it left); it was not made"
	return toolReply{ID: c.ID, Error: &why}.encode()
}

// verdict is a done frame: the exit status, how many bytes of output past
// the request's cap the runner dropped, and whether the kernel's OOM
// killer ended the worker (nil: the runner's cgroup does not say, as under
// gVisor; the daemon is asked then).
type verdict struct {
	Code    int   `json:"code"`
	Dropped int64 `json:"dropped"`
	OOM     *bool `json:"oom"`
}

// workerEnded is a session runner's ended frame: its worker died (the
// program's process, during a turn or between turns) and the supervisor
// exits next. OOM as in verdict.
type workerEnded struct {
	Code int   `json:"code"`
	OOM  *bool `json:"oom"`
}

func (e *workerEnded) Error() string {
	return fmt.Sprintf("the session's Python process ended (status %d)", e.Code)
}

// endedStatus decodes an ended frame, as an error for collect to return.
func endedStatus(payload []byte) error {
	e := &workerEnded{}
	if err := json.Unmarshal(payload, e); err != nil {
		return fmt.Errorf("%w: bad ended frame", errFraming)
	}
	return e
}

// doneStatus decodes a done frame.
func doneStatus(payload []byte) (verdict, error) {
	var d verdict
	if err := json.Unmarshal(payload, &d); err != nil {
		return verdict{}, fmt.Errorf("%w: bad done frame", errFraming)
	}
	return d, nil
}
