package main

import (
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pybox-dev/pybox/internal/bench"
)

// The bench end-to-end tests read `pybox bench`'s JSON reports with the
// package's own types.
type (
	benchReport     struct{ bench.Report }
	evalBenchReport = bench.EvalReport
)

func (r benchReport) row(prefix string) *bench.Row { return r.Find(prefix) }

// text joins a tool result's text content.
func text(res *mcp.CallToolResult) string { return bench.Text(res) }

// lastLine is the last non-empty line of s.
func lastLine(s string) string {
	s = strings.TrimSpace(s)
	return s[strings.LastIndexByte(s, '\n')+1:]
}
