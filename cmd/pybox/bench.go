package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pybox-dev/pybox/internal/app"
	"github.com/pybox-dev/pybox/internal/engine"
)

// benchRow is one measured scenario.
type benchRow struct {
	Name    string  `json:"name"`
	N       int     `json:"n"`
	P50MS   float64 `json:"p50_ms"`
	P95MS   float64 `json:"p95_ms"`
	MinMS   float64 `json:"min_ms"`
	Note    string  `json:"note,omitempty"`
	Skipped string  `json:"skipped,omitempty"`
}

// benchReport is the JSON form of the table.
type benchReport struct {
	Image string     `json:"image"`
	Rows  []benchRow `json:"rows"`
	// RatioMCPToDockerRun is p50(execute_code) / p50(docker run --rm).
	RatioMCPToDockerRun float64 `json:"ratio_mcp_to_docker_run"`
	// ServerRSSMiB is the server's resident memory after every scenario.
	ServerRSSMiB float64 `json:"server_rss_mib"`
}

func benchCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := commandConfig("bench")
	fs := newFlags("bench", "pybox bench [flags]", stderr, c)
	n := fs.Int("n", 20, "iterations per scenario")
	jsonOut := fs.String("json", "", "also write the JSON report to this file (\"-\" = stdout only JSON)")
	evalMode := fs.Bool("eval", false, "measure `pybox eval` throughput instead (samples/s against a docker run loop and a pybox run loop of -n samples)")
	evalTrivial := fs.Int("eval-trivial", 500, "with -eval: samples in the trivial batch")
	evalWork := fs.Int("eval-work", 200, "with -eval: samples in the real-work batch")
	evalFloor := fs.Bool("eval-floor", false, "measure `pybox eval --problems` on 164 trivial problems (1 and 5 samples each) against a docker run --rm loop and the floor (bare containers of true), --max-concurrent at once")
	kubeconfig := fs.String("kubernetes", "", "measure the Kubernetes backend instead, with this kubeconfig: warm, cold and session latency as pods, beside the same rows on Docker")
	egressBench := fs.Bool("egress", false, "measure one HTTPS request (new connection) from a program through pybox's egress proxy against the same request from the host, and a 100 MiB download through it")
	codeModeBench := fs.Bool("codemode", false, "measure code mode instead: one workflow as three direct tool calls and as one execute_code calling them (time and context bytes)")
	if err := parse(fs, c, args); err != nil {
		return err
	}
	if *n < 2 {
		return errors.New("bench: -n must be at least 2")
	}
	a, err := app.New(ctx, &c.Config, stderr)
	if err != nil {
		return err
	}
	defer a.Close()
	if a.Config.Image == "" {
		if err := a.EnsureRuntime(ctx, a.Config.InitialEnv().Variant); err != nil {
			return err
		}
	}
	if *codeModeBench {
		return benchCodeMode(ctx, *n, stdout, stderr)
	}
	if *evalFloor {
		return benchEvalFloor(ctx, a, c.forwardFlags(fs), *jsonOut, stdout, stderr)
	}
	if *evalMode {
		if *evalTrivial < 1 || *evalWork < 1 {
			return errors.New("bench: -eval-trivial and -eval-work must be at least 1")
		}
		return benchEval(ctx, a.Image, c.forwardFlags(fs), *evalTrivial, *evalWork, *n, *jsonOut, stdout, stderr)
	}
	b := &bench{n: *n, image: a.Image, stderr: stderr, eng: a.Engine}
	if *egressBench {
		rows, err := b.egressRows(ctx, c.forwardFlags(fs))
		if err != nil {
			return err
		}
		return writeReport(benchReport{Image: b.image, Rows: rows}, *jsonOut, stdout)
	}
	if *kubeconfig != "" {
		serve := c.forwardFlags(fs)
		rep := benchReport{Image: b.image, Rows: b.latencyRows(ctx, serve, " [docker]")}
		rep.Rows = append(rep.Rows, b.latencyRows(ctx, serve, " [kubernetes]", "PYBOX_BACKEND=kubernetes", "KUBECONFIG="+*kubeconfig)...)
		return writeReport(rep, *jsonOut, stdout)
	}
	if v, err := a.Engine.Ping(ctx); err == nil && slices.Contains(v.Runtimes, "runsc") && c.Runtime == "" {
		b.runtimes = []string{"runc", "runsc"} // the latency rows again under gVisor, beside runc
	}
	before, err := a.Engine.ListImages(ctx, "pybox.managed", "image")
	if err != nil {
		return err
	}
	rep, err := b.run(ctx, c.forwardFlags(fs))
	removeNewLayers(context.WithoutCancel(ctx), a, before, stderr)
	if err != nil {
		return err
	}
	return writeReport(rep, *jsonOut, stdout)
}

// removeNewLayers removes the package layers the bench's installs made. A
// layer with children cannot go before them, so it makes a few passes.
func removeNewLayers(ctx context.Context, a *app.App, before []engine.Image, stderr io.Writer) {
	old := map[string]bool{}
	for _, img := range before {
		old[img.ID] = true
	}
	var lastErr error
	for range 8 {
		after, err := a.Engine.ListImages(ctx, "pybox.managed", "image")
		if err != nil {
			lastErr = err
			break
		}
		left := 0
		for _, img := range after {
			if !old[img.ID] {
				if lastErr = a.Engine.RemoveImage(ctx, img.ID); lastErr != nil {
					left++
				}
			}
		}
		if left == 0 {
			return
		}
	}
	fmt.Fprintln(stderr, "bench: package layers left behind:", lastErr)
}

type bench struct {
	serverPID int
	n         int
	image     string
	stderr    io.Writer
	runtimes  []string // measured side by side by runtimeRows; nil = none
	eng       *engine.Client
}

func (b *bench) run(ctx context.Context, serveArgs []string) (benchReport, error) {
	wh, err := benchWheelhouse()
	if err != nil {
		return benchReport{}, err
	}
	defer os.RemoveAll(wh)
	cs, stop, err := b.connect(ctx, serveArgs, "PYBOX_WHEELHOUSE="+wh, "PYBOX_INSTALL_NETWORK=none")
	if err != nil {
		return benchReport{}, err
	}
	defer stop()
	rep := benchReport{Image: b.image}
	for _, sc := range b.scenarios(ctx, cs) {
		row, err := b.measure(sc)
		if err != nil {
			row = benchRow{Name: sc.name, Skipped: err.Error()}
		}
		row.Note = sc.note
		rep.Rows = append(rep.Rows, row)
	}
	rep.Rows = append(rep.Rows, b.burstRow(ctx, cs), b.concurrentRow(ctx, cs))
	rep.ServerRSSMiB = rssMiB(b.serverPID)
	stop()
	rep.Rows = append(rep.Rows, b.httpRows(ctx, serveArgs)...)
	for _, rt := range b.runtimes {
		rep.Rows = append(rep.Rows, b.runtimeRows(ctx, serveArgs, rt)...)
	}
	mcp, docker := rep.row("execute_code print(1)"), rep.row("docker run --rm")
	if mcp != nil && docker != nil && docker.P50MS > 0 && mcp.Skipped == "" {
		rep.RatioMCPToDockerRun = round(mcp.P50MS / docker.P50MS)
	}
	return rep, nil
}

// row finds the first row whose name starts with prefix.
func (r benchReport) row(prefix string) *benchRow {
	for i := range r.Rows {
		if strings.HasPrefix(r.Rows[i].Name, prefix) {
			return &r.Rows[i]
		}
	}
	return nil
}

// connect starts `pybox serve` (this binary) and connects an MCP client.
func (b *bench) connect(ctx context.Context, serveArgs []string, env ...string) (*mcp.ClientSession, func(), error) {
	b.serverPID = 0
	self, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	storage, err := os.MkdirTemp("", "pybox-bench-")
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(self, append([]string{"serve", "--log-level=warn"}, serveArgs...)...)
	state, err := os.MkdirTemp("", "pybox-bench-state-")
	if err != nil {
		return nil, nil, err
	}
	cmd.Env = append(append(os.Environ(), "CODE_STORAGE_DIR="+storage, "PYBOX_STATE_DIR="+state), env...)
	cmd.Stderr = b.stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "pybox-bench", Version: version}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	cleanup := func() { os.RemoveAll(storage); os.RemoveAll(state) }
	if err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("start pybox serve: %w", err)
	}
	b.serverPID = cmd.Process.Pid
	var once sync.Once
	return cs, func() { once.Do(func() { cs.Close(); cleanup() }) }, nil
}

// rssMiB reads a process's resident set size from /proc (0 if unknown).
func rssMiB(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		var kb float64
		if _, err := fmt.Sscanf(line, "VmRSS: %f kB", &kb); err == nil {
			return round(kb / 1024)
		}
	}
	return 0
}

// measure runs the scenario's setup, one warm-up call (unless cold), then
// its calls, and summarises.
func (b *bench) measure(sc scenario) (benchRow, error) {
	n := b.n
	if sc.n > 0 {
		n = sc.n
	}
	row := benchRow{Name: sc.name, N: n}
	fmt.Fprintf(b.stderr, "bench: %s ...\n", sc.name)
	if sc.setup != nil {
		if err := sc.setup(); err != nil {
			return row, err
		}
	}
	if !sc.cold {
		if err := sc.call(0); err != nil {
			return row, err
		}
	}
	ds := make([]time.Duration, 0, n)
	for i := range n {
		time.Sleep(sc.pause)
		t := time.Now()
		if err := sc.call(i + 1); err != nil {
			return row, err
		}
		ds = append(ds, time.Since(t))
	}
	return summarise(sc.name, ds), nil
}

func percentile(sorted []time.Duration, p int) time.Duration {
	i := (len(sorted)*p + 99) / 100
	return sorted[max(min(i, len(sorted))-1, 0)]
}

func ms(d time.Duration) float64 { return round(float64(d.Microseconds()) / 1000) }

func round(f float64) float64 { return float64(int64(f*100+0.5)) / 100 }

func writeReport(rep benchReport, jsonPath string, stdout io.Writer) error {
	js, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if jsonPath == "-" {
		_, err = fmt.Fprintf(stdout, "%s\n", js)
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\tn\tp50 ms\tp95 ms\tmin ms\tnote")
	for _, r := range rep.Rows {
		if r.Skipped != "" {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t-\tskipped: %s\n", r.Name, r.Skipped)
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%.1f\t%s\n", r.Name, r.N, r.P50MS, r.P95MS, r.MinMS, r.Note)
	}
	tw.Flush()
	if rep.RatioMCPToDockerRun > 0 {
		fmt.Fprintf(stdout, "\nexecute_code p50 / docker run p50 = %.2f\n", rep.RatioMCPToDockerRun)
	}
	if rep.ServerRSSMiB > 0 {
		fmt.Fprintf(stdout, "server resident memory after the scenarios: %.1f MiB\n", rep.ServerRSSMiB)
	}
	fmt.Fprintf(stdout, "\nJSON:\n%s\n", js)
	if jsonPath != "" {
		return os.WriteFile(jsonPath, append(js, '\n'), 0o644)
	}
	return nil
}
