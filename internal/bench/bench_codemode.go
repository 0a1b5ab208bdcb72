package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// benchCodeMode compares one workflow (list a folder, read a file, write
// it back transformed) done (a) as three tool calls a model makes one by
// one to a downstream MCP server, and (b) as one code-mode execute_code
// whose program calls the same three tools: wall time and the bytes that
// pass through the model's context (arguments sent plus results read).
// The downstream server is pybox itself (its file tools), started over stdio.
func benchCodeMode(ctx context.Context, n int, version string, stdout, stderr io.Writer) error {
	self, dir, err := benchScratch("pybox-bench-codemode-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	data := filepath.Join(dir, "data")
	os.MkdirAll(data, 0o755)
	var doc strings.Builder
	for i := range 400 {
		fmt.Fprintf(&doc, "line %d of a report that a model would otherwise read and write back whole\n", i)
	}
	if err := os.WriteFile(filepath.Join(data, "report.txt"), []byte(doc.String()), 0o644); err != nil {
		return err
	}
	downstreamEnv := []string{"CODE_STORAGE_DIR=" + data, "PYBOX_STATE_DIR=" + filepath.Join(dir, "ds-state"), "PYBOX_LOG_LEVEL=warn"}
	servers := filepath.Join(dir, "mcp_servers.json")
	cfg, _ := json.Marshal(map[string]any{"servers": map[string]any{"files": map[string]any{
		"command": self, "args": []string{"serve"}, "env": envMap(downstreamEnv)}}})
	os.WriteFile(servers, cfg, 0o644)

	connect := func(env ...string) (*mcp.ClientSession, error) {
		cmd := exec.Command(self, "serve", "--log-level=warn")
		cmd.Env = append(os.Environ(), env...)
		cmd.Stderr = stderr
		return mcp.NewClient(&mcp.Implementation{Name: "pybox-bench", Version: version}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	}
	// (a) Three direct calls to the downstream server.
	direct, err := connect(downstreamEnv...)
	if err != nil {
		return err
	}
	defer direct.Close()
	call := func(cs *mcp.ClientSession, name string, args map[string]any) (int, string, error) {
		b, _ := json.Marshal(args)
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			return 0, "", err
		}
		if res.IsError {
			return 0, "", fmt.Errorf("%s: %s", name, Text(res))
		}
		return len(b) + len(Text(res)), Text(res), nil
	}
	var directTimes []time.Duration
	directBytes := 0
	for i := range n + 1 {
		start := time.Now()
		total := 0
		b1, _, err := call(direct, "list_files", map[string]any{})
		if err != nil {
			return err
		}
		b2, content, err := call(direct, "read_file", map[string]any{"path": "report.txt"})
		if err != nil {
			return err
		}
		b3, _, err := call(direct, "write_file", map[string]any{"path": fmt.Sprintf("direct-%d.txt", i), "content": strings.ToUpper(content)})
		if err != nil {
			return err
		}
		total = b1 + b2 + b3
		if i > 0 { // the first is a warm-up
			directTimes = append(directTimes, time.Since(start))
			directBytes = total
		}
	}
	// (b) One code-mode execute_code.
	mode, err := connect("CODE_STORAGE_DIR="+filepath.Join(dir, "code"), "PYBOX_STATE_DIR="+filepath.Join(dir, "state"), "PYBOX_MCP_SERVERS="+servers)
	if err != nil {
		return err
	}
	defer mode.Close()
	var modeTimes []time.Duration
	modeBytes := 0
	for i := range n + 1 {
		prog := fmt.Sprintf("from pybox_tools import tools\ntools.files.list_files()\n"+
			"text = tools.files.read_file(path='report.txt')\n"+
			"tools.files.write_file(path='mode-%d.txt', content=text.upper() if isinstance(text, str) else str(text).upper())\nprint('done')\n", i)
		start := time.Now()
		b, out, err := call(mode, "execute_code", map[string]any{"code": prog})
		if err != nil {
			return err
		}
		if !strings.Contains(out, "done") {
			return fmt.Errorf("code mode run: %s", out)
		}
		if i > 0 {
			modeTimes = append(modeTimes, time.Since(start))
			modeBytes = b
		}
	}
	p50 := func(ds []time.Duration) float64 { slices.Sort(ds); return ms(percentile(ds, 50)) }
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "workflow: list a folder, read a 30 KB file, write it back upper-cased\tn\tp50 ms\tcontext bytes")
	fmt.Fprintf(tw, "three tool calls, one by one (the model reads and resends the file)\t%d\t%.1f\t%d\n", n, p50(directTimes), directBytes)
	fmt.Fprintf(tw, "one code-mode execute_code calling the same three tools\t%d\t%.1f\t%d\n", n, p50(modeTimes), modeBytes)
	tw.Flush()
	fmt.Fprintf(stdout, "context bytes: code mode uses %.1f%% of the direct calls' (model round trips: 1 instead of 3; their own latency is not counted here)\n",
		100*float64(modeBytes)/float64(directBytes))
	return nil
}

// envMap turns KEY=VALUE pairs into a map.
func envMap(env []string) map[string]string {
	m := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}
