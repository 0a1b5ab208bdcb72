package bench

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

	"github.com/pybox-dev/pybox/images"
	"github.com/pybox-dev/pybox/internal/app"
	"github.com/pybox-dev/pybox/internal/contract"
	"github.com/pybox-dev/pybox/internal/engine"
	"github.com/pybox-dev/pybox/internal/kube"
)

// Row is one measured scenario.
type Row struct {
	Name    string  `json:"name"`
	N       int     `json:"n"`
	P50MS   float64 `json:"p50_ms"`
	P95MS   float64 `json:"p95_ms"`
	MinMS   float64 `json:"min_ms"`
	Note    string  `json:"note,omitempty"`
	Skipped string  `json:"skipped,omitempty"`
}

// Report is the JSON form of the table.
type Report struct {
	Image string `json:"image"`
	Rows  []Row  `json:"rows"`
	// RatioMCPToDockerRun is p50(execute_code) / p50(docker run --rm).
	RatioMCPToDockerRun float64 `json:"ratio_mcp_to_docker_run"`
	// ServerRSSMiB is the server's resident memory after every scenario.
	ServerRSSMiB float64 `json:"server_rss_mib"`
}

// Options are what `pybox bench` measures, and how.
type Options struct {
	N           int    // iterations per scenario (at least 2)
	JSON        string // also write the JSON report to this file ("-": only JSON, on stdout)
	Eval        bool   // measure `pybox eval` throughput instead
	EvalTrivial int    // with Eval: samples in the trivial batch
	EvalWork    int    // with Eval: samples in the real-work batch
	EvalFloor   bool   // measure `pybox eval --problems` against a docker run loop and the floor
	Kubeconfig  string // measure the Kubernetes backend with this kubeconfig, beside Docker
	Egress      bool   // measure requests through the egress proxy
	CodeMode    bool   // measure code mode
	Version     string // pybox's, the bench's MCP clients say
	// Forward are the settings given to pybox bench, as flags for the
	// pybox servers it starts; EvalForward and RunForward those `pybox
	// eval` and `pybox run` have.
	Forward, EvalForward, RunForward []string
}

// Check refuses options no bench can run with, before anything starts.
func (o Options) Check() error {
	if o.N < 2 {
		return errors.New("bench: -n must be at least 2")
	}
	if o.Eval && (o.EvalTrivial < 1 || o.EvalWork < 1) {
		return errors.New("bench: -eval-trivial and -eval-work must be at least 1")
	}
	return nil
}

// Run measures what o says through pybox processes of this executable,
// over a's engine and runtime image, and writes the report on stdout.
func Run(ctx context.Context, a *app.App, o Options, stdout, stderr io.Writer) error {
	if err := o.Check(); err != nil {
		return err
	}
	if a.Config.Image == "" {
		if err := a.EnsureRuntime(ctx, a.Config.InitialEnv().Variant); err != nil {
			return err
		}
	}
	if o.CodeMode {
		return benchCodeMode(ctx, o.N, o.Version, stdout, stderr)
	}
	if o.EvalFloor {
		return benchEvalFloor(ctx, a, o.EvalForward, o.JSON, stdout, stderr)
	}
	if o.Eval {
		return benchEval(ctx, a.Image, o.RunForward, o.EvalForward, o.EvalTrivial, o.EvalWork, o.N, o.JSON, stdout, stderr)
	}
	b := &bench{n: o.N, image: a.Image, stderr: stderr, eng: a.Engine, version: o.Version, pkgs: packagePrefix()}
	if o.Egress {
		rows, err := b.egressRows(ctx, o.Forward)
		if err != nil {
			return err
		}
		return writeReport(Report{Image: b.image, Rows: rows}, o.JSON, stdout)
	}
	if o.Kubeconfig != "" {
		return writeReport(b.kubernetesRows(ctx, a, o), o.JSON, stdout)
	}
	if v, err := a.Engine.Ping(ctx); err == nil && slices.Contains(v.Runtimes, "runsc") && a.Config.Runtime == "" {
		b.runtimes = []string{"runc", "runsc"} // the latency rows again under gVisor, beside runc
	}
	rep, err := b.run(ctx, o.Forward)
	b.removeLayers(context.WithoutCancel(ctx))
	if err != nil {
		return err
	}
	return writeReport(rep, o.JSON, stdout)
}

// kubernetesRows are the latency rows on Docker, as pods, and, when the
// cluster has a RuntimeClass for gVisor (and no --runtime was given), as
// pods under it.
func (b *bench) kubernetesRows(ctx context.Context, a *app.App, o Options) Report {
	env := []string{"PYBOX_BACKEND=kubernetes", "KUBECONFIG=" + o.Kubeconfig}
	rep := Report{Image: b.image, Rows: b.latencyRows(ctx, o.Forward, " [docker]")}
	rep.Rows = append(rep.Rows, b.latencyRows(ctx, o.Forward, " [kubernetes]", env...)...)
	if a.Config.Runtime != "" {
		return rep
	}
	class, err := kube.GVisorRuntimeClass(ctx, o.Kubeconfig)
	switch {
	case err != nil:
		rep.Rows = append(rep.Rows, Row{Name: "execute_code [kubernetes gVisor]", Skipped: err.Error()})
	case class != "":
		rep.Rows = append(rep.Rows, b.latencyRows(ctx, o.Forward, " [kubernetes "+class+"]", append(env, "PYBOX_RUNTIME="+class)...)...)
	}
	return rep
}

// removeLayers removes the package layers the bench's installs made: those
// whose lineage installed one of its packages (named with its own prefix),
// and no other, such as a layer another pybox server on the daemon made
// meanwhile. A layer with children cannot go before them, so it makes a
// few passes.
func (b *bench) removeLayers(ctx context.Context) {
	var lastErr error
	for range 8 {
		list, err := b.eng.ListImages(ctx, contract.LabelManaged, "image")
		if err != nil {
			lastErr = err
			break
		}
		left := 0
		for _, img := range list {
			if b.made(img) {
				if lastErr = b.eng.RemoveImage(ctx, img.ID); lastErr != nil {
					left++
				}
			}
		}
		if left == 0 {
			return
		}
	}
	fmt.Fprintln(b.stderr, "bench: package layers left behind:", lastErr)
}

// made says whether img is a package layer of the bench's installs.
func (b *bench) made(img engine.Image) bool {
	var reqs []string
	if json.Unmarshal([]byte(img.Labels[images.LabelRequirements]), &reqs) != nil {
		return false
	}
	return slices.ContainsFunc(reqs, func(r string) bool { return strings.HasPrefix(r, b.pkgs+"x") })
}

type bench struct {
	serverPID int
	n         int
	image     string
	stderr    io.Writer
	runtimes  []string // measured side by side by runtimeRows; nil = none
	eng       *engine.Client
	version   string // pybox's, its MCP clients say
	pkgs      string // the prefix of its packages' names (packagePrefix)
}

func (b *bench) run(ctx context.Context, serveArgs []string) (Report, error) {
	wh, err := b.wheelhouse()
	if err != nil {
		return Report{}, err
	}
	defer os.RemoveAll(wh)
	cs, stop, err := b.connect(ctx, serveArgs, "PYBOX_WHEELHOUSE="+wh, "PYBOX_INSTALL_NETWORK=none")
	if err != nil {
		return Report{}, err
	}
	defer stop()
	rep := Report{Image: b.image}
	for _, sc := range b.scenarios(ctx, cs) {
		row, err := b.measure(sc)
		if err != nil {
			row = Row{Name: sc.name, Skipped: err.Error()}
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
	mcp, docker := rep.Find("execute_code print(1)"), rep.Find("docker run --rm")
	if mcp != nil && docker != nil && docker.P50MS > 0 && mcp.Skipped == "" {
		rep.RatioMCPToDockerRun = round(mcp.P50MS / docker.P50MS)
	}
	return rep, nil
}

// Find is the first row whose name starts with prefix.
func (r Report) Find(prefix string) *Row {
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
	client := mcp.NewClient(&mcp.Implementation{Name: "pybox-bench", Version: b.version}, nil)
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
func (b *bench) measure(sc scenario) (Row, error) {
	n := b.n
	if sc.n > 0 {
		n = sc.n
	}
	row := Row{Name: sc.name, N: n}
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

func writeReport(rep Report, jsonPath string, stdout io.Writer) error {
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
