package tools

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// admission bounds the tool calls in flight and the bytes of their
// arguments. A call past either bound is refused at once with a tool
// error: nothing of it is decoded, saved or queued, so a client sending
// many large calls costs the server only what the bounds allow.
type admission struct {
	maxCalls, maxBytes int
	log                *slog.Logger

	mu           sync.Mutex
	calls, bytes int
	refused      int // since the last warning
}

func (a *admission) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		call, ok := req.(*mcp.CallToolRequest)
		if !ok || call.Params == nil {
			return next(ctx, method, req)
		}
		size := len(call.Params.Arguments)
		if why := a.take(size); why != "" {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: why}}}, nil
		}
		defer a.release(size)
		return next(ctx, method, req)
	}
}

// take admits a call with size bytes of arguments, or says why not.
func (a *admission) take(size int) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var why string
	switch {
	case a.calls >= a.maxCalls:
		why = fmt.Sprintf("the server is busy: %d tool calls are already in flight (the limit); nothing was run or saved — wait for some to finish and call again", a.calls)
	case a.calls > 0 && a.bytes+size > a.maxBytes:
		why = fmt.Sprintf("the server is busy: the calls in flight already carry %d bytes of arguments and this one %d (the limit is %d); nothing was run or saved — wait for some to finish and call again", a.bytes, size, a.maxBytes)
	default:
		a.calls++
		a.bytes += size
		return ""
	}
	// One warning per burst: the first refusal, then every 100th.
	if a.refused++; a.refused%100 == 1 {
		a.log.Warn("refused tool calls: too many in flight", "in_flight", a.calls, "bytes_in_flight", a.bytes, "refused", a.refused)
	}
	return why
}

func (a *admission) release(size int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls--
	a.bytes -= size
	if a.calls == 0 {
		a.refused = 0
	}
}
