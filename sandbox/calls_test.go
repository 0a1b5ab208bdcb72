package sandbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pybox-dev/pybox/sandbox"
)

// countedTools is a ToolCalls that answers every call at once and refuses
// those past its limit, as code mode does.
type countedTools struct {
	limit int
	n     atomic.Int64
}

func (c *countedTools) Names() []string { return []string{"t.x"} }
func (c *countedTools) Limit() int      { return c.limit }
func (c *countedTools) Call(ctx context.Context, name string, args json.RawMessage) (any, error) {
	if c.n.Add(1) > int64(c.limit) {
		return nil, errors.New("over the limit")
	}
	return "ok", nil
}

// floodCalls writes tool-call lines straight onto the program's call pipe
// (found through the stub's closure: no import) and never reads a reply.
const floodCalls = `from pybox_tools import call_mcp_tool
cells = dict(zip(call_mcp_tool.__code__.co_freevars, [c.cell_contents for c in call_mcp_tool.__closure__]))
pipe = open(cells["call_w"], "wb", buffering=0, closefd=False)
lines = b'{"id": 1, "tool": "t.x", "args": {}}\n' * 2000
while True:
    pipe.write(lines)
`

// peakGoroutines samples the process's goroutines until stop is called,
// which returns the highest count seen.
func peakGoroutines() (stop func() int) {
	var peak atomic.Int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			if n := int64(runtime.NumGoroutine()); n > peak.Load() {
				peak.Store(n)
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	})
	return func() int { close(done); wg.Wait(); return int(peak.Load()) }
}

// TestToolCallFlood: a program that floods its tool-call channel without
// reading the replies holds a bounded number of the server's goroutines;
// it is ended well before its deadline with a note saying why, its
// container discarded, and the sandbox still serves, in a run and in a
// session.
func TestToolCallFlood(t *testing.T) {
	sb, _ := newSandbox(t, sandbox.Config{})
	base := runtime.NumGoroutine()
	stop := peakGoroutines()
	start := time.Now()
	tools := &countedTools{limit: 50}
	res, err := sb.Run(t.Context(), sandbox.Program{Workspace: workspace(t, floodCalls), File: "main.py", Timeout: 8 * time.Second, Tools: tools})
	peak, took := stop(), time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("run: %v, exit %d, %d calls answered, goroutines %d -> peak %d, stderr %q", took.Round(time.Millisecond), res.ExitCode, tools.n.Load(), base, peak, res.Stderr)
	if peak > base+64 {
		t.Errorf("goroutines grew from %d to %d during the flood; want them bounded", base, peak)
	}
	if res.TimedOut || res.Duration > 6*time.Second || res.ExitCode != 137 || !strings.Contains(res.Stderr, "tool call") { // the program's time: the container's start under load is not the flood check's (seen: 6.5 s wall, 0.8 s program)
		t.Errorf("the flooding run was not ended with a note: %+v (took %v)", res, took)
	}
	if n := tools.n.Load(); n > 200 {
		t.Errorf("%d calls were answered; the run should end soon after its limit of %d", n, tools.limit)
	}
	res, err = sb.Run(t.Context(), sandbox.Program{Workspace: workspace(t, "print('still serving')"), File: "main.py"})
	if err != nil || res.Stdout != "still serving\n" {
		t.Errorf("after the flood: %v %+v", err, res)
	}
	// A program that waits for each reply but goes on calling after its
	// limit is ended too, soon after it.
	retry := "from pybox_tools import call_mcp_tool, MCPToolError\nfor i in range(100000):\n    try:\n        call_mcp_tool('t.x')\n    except MCPToolError:\n        pass\n"
	res, err = sb.Run(t.Context(), sandbox.Program{Workspace: workspace(t, retry), File: "main.py", Timeout: 8 * time.Second, Tools: &countedTools{limit: 5}})
	if err != nil || res.TimedOut || !strings.Contains(res.Stderr, "far past its limit of 5") {
		t.Errorf("a program calling on past its limit: %v %+v", err, res)
	}
	// A session: the turn is lost, the next one starts clean.
	res, err = sb.RunInSession(t.Context(), "flood", sandbox.SessionProgram{Code: floodCalls, Filename: "/workspace/cell.py", Timeout: 8 * time.Second, Tools: &countedTools{limit: 5}})
	if err != nil || !res.SessionLost || !strings.Contains(res.Stderr, "tool call") {
		t.Errorf("a flooding session turn: %v %+v", err, res)
	}
	res, err = sb.RunInSession(t.Context(), "flood", sandbox.SessionProgram{Code: "print(1)", Filename: "/workspace/cell.py"})
	if err != nil || res.Stdout != "1\n" {
		t.Errorf("the session after the flood: %v %+v", err, res)
	}
}
