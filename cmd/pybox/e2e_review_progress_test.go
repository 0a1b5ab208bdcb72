//go:build !windows

package main

import (
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestProgressStderrAtBatchCap: a program that fills one progress batch
// almost to its cap and then writes to stderr gets its result, and the
// server keeps serving (the "[stderr] " marker once overran the batch and
// panicked on the output-copy goroutine, killing the server).
func TestProgressStderrAtBatchCap(t *testing.T) {
	parallelTest(t)
	s := startServerWith(t, &mcp.ClientOptions{ProgressNotificationHandler: (&notes{}).handler})
	code := "import sys\nsys.stdout.write('x' * 8190)\nsys.stdout.flush()\nsys.stderr.write('boom\\n')\nsys.stderr.flush()\n"
	for i := range 5 { // the two writes usually share a batch; repeat to make sure
		res, err := s.cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "execute_code",
			Arguments: map[string]any{"code": code}, Meta: mcp.Meta{"progressToken": i}})
		if err != nil {
			t.Fatalf("call %d with progress: %v", i, err)
		}
		if out := decode[struct {
			Stdout string `json:"stdout"`
			Stderr string `json:"stderr"`
		}](t, res); len(out.Stdout) != 8190 || out.Stderr != "boom\n" {
			t.Errorf("call %d: stdout %d bytes, stderr %q; want 8190 bytes and %q", i, len(out.Stdout), out.Stderr, "boom\n")
		}
	}
	if out, _ := s.exec(map[string]any{"code": "print('still serving')"}); !strings.Contains(out.Stdout, "still serving") {
		t.Errorf("the server no longer serves: %q", out.Stdout)
	}
}
