package serve

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// maxMessage bounds one JSON-RPC line on stdio (the SDK's default).
const maxMessage = 16 << 20

// lockedWriter serialises whole-message writes to stdout from the SDK and
// from the guard below, and notes when a write started that has not
// ended, so a client that stopped reading can be told from a busy one.
type lockedWriter struct {
	mu      sync.Mutex
	w       io.Writer
	writing atomic.Int64 // unix nanoseconds when the write under way began; 0 = none
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writing.Store(time.Now().UnixNano())
	defer l.writing.Store(0)
	return l.w.Write(p)
}

// blocked is how long the write under way has been blocked; 0 if none.
func (l *lockedWriter) blocked() time.Duration {
	if t := l.writing.Load(); t != 0 {
		return time.Since(time.Unix(0, t))
	}
	return 0
}

// ErrStalled: the client stopped reading what the server writes.
var ErrStalled = errors.New("the client stopped reading the server's output")

// watchStall returns, on stalled, once a write to out has been blocked
// for longer than limit, until done is closed.
func watchStall(out *lockedWriter, limit time.Duration, done <-chan struct{}) <-chan struct{} {
	stalled := make(chan struct{})
	go func() {
		tick := time.NewTicker(max(limit/10, 10*time.Millisecond))
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				if out.blocked() > limit {
					close(stalled)
					return
				}
			}
		}
	}()
	return stalled
}

func (l *lockedWriter) Close() error { return nil }

// stdioGuard sits between stdin and the SDK. A line that is not a JSON-RPC
// message (not JSON, not a request/notification/response, or too long) is
// answered with a JSON-RPC error and dropped, so a confused client cannot
// stop the server; everything else passes through unchanged.
type stdioGuard struct {
	in    io.Reader
	out   io.Writer // shared with the SDK through a lockedWriter
	pipe  *io.PipeWriter
	log   *slog.Logger
	onEOF func() // called when stdin ends (the client went away); may be nil
}

// run copies stdin's valid lines into the pipe until stdin ends.
func (g *stdioGuard) run() {
	r := bufio.NewReaderSize(g.in, 64<<10)
	for {
		line, tooLong, err := readLine(r)
		if len(bytes.TrimSpace(line)) > 0 || tooLong {
			g.pass(line, tooLong)
		}
		if err != nil {
			if g.onEOF != nil {
				g.onEOF()
			}
			g.pipe.CloseWithError(err) // io.EOF makes the SDK's reader end cleanly
			return
		}
	}
}

func (g *stdioGuard) pass(line []byte, tooLong bool) {
	if ids, ok := batchIDs(line, tooLong); ok {
		g.log.Warn("refused a JSON-RPC batch", "requests", len(ids))
		g.out.Write(batchRefusal(ids)) // a client that cannot read our error gets nothing worse
		return
	}
	if problem := checkMessage(line, tooLong); problem != nil {
		g.log.Warn("dropped a malformed protocol message", "err", problem, "bytes", len(line))
		code := jsonrpc.CodeInvalidRequest
		if errors.Is(problem, errNotJSON) {
			code = jsonrpc.CodeParseError
		}
		resp, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil, // plain values always marshal
			"error": map[string]any{"code": code, "message": problem.Error()}})
		g.out.Write(append(resp, '\n')) // a client that cannot read our error gets nothing worse
		return
	}
	if _, err := g.pipe.Write(append(line, '\n')); err != nil {
		return // the SDK stopped reading; run ends at the next read error
	}
}

var errNotJSON = errors.New("parse error: the line is not JSON")

// checkMessage says what is wrong with a line, or nil.
func checkMessage(line []byte, tooLong bool) error {
	switch {
	case tooLong:
		return fmt.Errorf("invalid request: a message is longer than %d bytes", maxMessage)
	case !json.Valid(line):
		return errNotJSON
	}
	trimmed := bytes.TrimSpace(line)
	if trimmed[0] == '[' {
		return errors.New("invalid request: an empty or malformed batch")
	}
	if _, err := jsonrpc.DecodeMessage(trimmed); err != nil {
		return fmt.Errorf("invalid request: %v", err)
	}
	return nil
}

// errBatch is the answer to every request of a batch: MCP (since
// 2025-06-18) has no JSON-RPC batching, and the SDK would not answer.
const errBatch = "invalid request: JSON-RPC batches are not supported; send one message per line"

// batchIDs returns the ids of the requests in a well-formed, non-empty
// batch line (notifications have none); ok is false for anything else.
func batchIDs(line []byte, tooLong bool) (ids []json.RawMessage, ok bool) {
	trimmed := bytes.TrimSpace(line)
	if tooLong || len(trimmed) == 0 || trimmed[0] != '[' {
		return nil, false
	}
	var batch []struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(trimmed, &batch) != nil || len(batch) == 0 {
		return nil, false
	}
	for _, m := range batch {
		if len(m.ID) > 0 && string(m.ID) != "null" {
			ids = append(ids, m.ID)
		}
	}
	return ids, true
}

// batchRefusal is the batch response: an error for each request id, or
// one error without an id when the batch held only notifications.
func batchRefusal(ids []json.RawMessage) []byte {
	errBody := map[string]any{"code": jsonrpc.CodeInvalidRequest, "message": errBatch}
	if len(ids) == 0 {
		resp, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil, "error": errBody}) // plain values always marshal
		return append(resp, '\n')
	}
	out := make([]map[string]any, 0, len(ids))
	for _, id := range ids {
		out = append(out, map[string]any{"jsonrpc": "2.0", "id": id, "error": errBody})
	}
	resp, _ := json.Marshal(out) // idem
	return append(resp, '\n')
}

// readLine reads one newline-terminated line; a line over maxMessage is
// skipped to its end and reported as tooLong.
func readLine(r *bufio.Reader) (line []byte, tooLong bool, err error) {
	for {
		chunk, err := r.ReadSlice('\n')
		if len(line)+len(chunk) > maxMessage {
			tooLong, line = true, nil
		} else if !tooLong {
			line = append(line, chunk...)
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return bytes.TrimRight(line, "\r\n"), tooLong, err
		}
	}
}
