package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// maxMessage bounds one JSON-RPC line on stdio (the SDK's default).
const maxMessage = 16 << 20

// lockedWriter serialises whole-message writes to stdout from the SDK and
// from the guard below.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lockedWriter) Close() error { return nil }

// stdioGuard sits between stdin and the SDK. A line that is not a JSON-RPC
// message (not JSON, not a request/notification/response, or too long) is
// answered with a JSON-RPC error and dropped, so a confused client cannot
// stop the server; everything else passes through unchanged.
type stdioGuard struct {
	in   io.Reader
	out  io.Writer // shared with the SDK through a lockedWriter
	pipe *io.PipeWriter
	log  *slog.Logger
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
			g.pipe.CloseWithError(err) // io.EOF makes the SDK's reader end cleanly
			return
		}
	}
}

func (g *stdioGuard) pass(line []byte, tooLong bool) {
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
		var batch []json.RawMessage
		if err := json.Unmarshal(trimmed, &batch); err != nil || len(batch) == 0 {
			return errors.New("invalid request: an empty or malformed batch")
		}
		for _, m := range batch {
			if _, err := jsonrpc.DecodeMessage(m); err != nil {
				return fmt.Errorf("invalid request: %v", err)
			}
		}
		return nil
	}
	if _, err := jsonrpc.DecodeMessage(trimmed); err != nil {
		return fmt.Errorf("invalid request: %v", err)
	}
	return nil
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
