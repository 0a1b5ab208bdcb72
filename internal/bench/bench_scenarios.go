package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pybox-dev/pybox/internal/wheel"
)

// scenario is one benchmark row.
type scenario struct {
	name  string
	note  string
	n     int // calls measured; 0 = the -n flag
	cold  bool
	pause time.Duration // between calls, unmeasured (think time: the pool refills)
	setup func() error
	call  func(i int) error // i is 0 for the warm-up call
}

// benchPackages is how many distinct packages the first-install row uses
// (each first install is a new layer, so the row measures a few).
const benchPackages = 3

func (b *bench) scenarios(ctx context.Context, cs *mcp.ClientSession) []scenario {
	exec := func(args map[string]any, want string) func(int) error {
		return func(int) error { return callExpect(ctx, cs, "execute_code", args, want) }
	}
	print1 := map[string]any{"code": "print(1)"}
	install := func(i int) error {
		return callExpect(ctx, cs, "install_dependencies", map[string]any{"packages": []string{b.benchPackage(i)}}, "Installed")
	}
	return []scenario{
		{name: "execute_code print(1), calls 0.5 s apart", note: "warm pool: a ready container each time", pause: 500 * time.Millisecond,
			call: exec(print1, "1\n")},
		{name: "execute_code print(1) (MCP, single-use container)", note: "back to back: the pool refills meanwhile", call: exec(print1, "1\n")},
		{name: "docker run --rm IMAGE python -c 'print(1)'", call: func(int) error { return dockerRunPrint1(ctx, b.image) }},
		{name: "install_dependencies, first install (new layer)", n: benchPackages, cold: true,
			call: func(i int) error { return install(i - 1) }},
		{name: "install_dependencies, cache hit", note: "target < 100 ms",
			call: func(int) error {
				return callExpect(ctx, cs, "install_dependencies", map[string]any{"packages": []string{b.benchPackage(0)}}, "cached")
			}},
		{name: "execute_code after the installs (import one)", note: "same as before the installs",
			call: exec(map[string]any{"code": "import " + b.benchPackage(0) + "\nprint(1)"}, "1\n")},
		{name: "execute_code in a live session print(1)", note: "target p50 <= 5 ms; measured once the pool's refills are done",
			setup: settle, call: exec(map[string]any{"code": "print(1)", "session_id": "bench"}, "1\n")},
		{name: "execute_code returning one figure", note: "needs the datascience variant", setup: b.figureSetup(ctx, cs),
			call: func(int) error { return callFigure(ctx, cs) }},
	}
}

// settle waits for the refills a back-to-back row left to finish: a row
// measuring sessions measures the session, not two cores shared with
// container starts (which made its p50 6-8 ms instead of 2-4).
func settle() error {
	time.Sleep(2 * time.Second)
	return nil
}

// benchPackage names the i-th generated package: the bench's prefix
// (packagePrefix), so that its layers are known as its own.
func (b *bench) benchPackage(i int) string { return fmt.Sprintf("%sx%d", b.pkgs, i) }

// packagePrefix starts the names of one bench's packages: pyboxbench and
// random digits, which no other bench or installer uses.
func packagePrefix() string { return fmt.Sprintf("pyboxbench%09d", rand.IntN(1e9)) }

// benchWheelhouse writes the benchmark's packages into a fresh directory.
func (b *bench) wheelhouse() (string, error) {
	dir, err := os.MkdirTemp("", "pybox-bench-wheels-")
	if err != nil {
		return "", err
	}
	os.Chmod(dir, 0o755) // the install container reads it as root; best effort
	nonce := fmt.Sprint(os.Getpid())
	for i := range benchPackages {
		if _, err := wheel.Write(dir, wheel.Wheel{Name: b.benchPackage(i), Version: "1.0." + nonce, Code: "X = 1\n"}); err != nil {
			os.RemoveAll(dir)
			return "", err
		}
	}
	return dir, nil
}

// figureSetup switches to the datascience variant when its image exists.
func (b *bench) figureSetup(ctx context.Context, cs *mcp.ClientSession) func() error {
	return func() error {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "configure_environment",
			Arguments: map[string]any{"type": "venv-uv", "variant": "datascience"}})
		if err != nil {
			return err
		}
		if res.IsError {
			return errors.New("datascience image unavailable (pybox image build --variant datascience)")
		}
		return nil
	}
}

const figureCode = "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\n"

func callFigure(ctx context.Context, cs *mcp.ClientSession) error {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "execute_code", Arguments: map[string]any{"code": figureCode}})
	if err != nil {
		return err
	}
	for _, c := range res.Content {
		if img, ok := c.(*mcp.ImageContent); ok && img.MIMEType == "image/png" {
			return nil
		}
	}
	return fmt.Errorf("no figure came back: %s", Text(res))
}

// callExpect calls a tool and checks that its text contains want.
func callExpect(ctx context.Context, cs *mcp.ClientSession, name string, args map[string]any, want string) error {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return err
	}
	if res.IsError || !strings.Contains(Text(res), want) {
		return fmt.Errorf("%s: unexpected result: %s", name, Text(res))
	}
	return nil
}

func dockerRunPrint1(ctx context.Context, image string, flags ...string) error {
	args := append(append([]string{"run", "--rm", "--network", "none"}, flags...), image, "/opt/venv/bin/python", "-c", "print(1)")
	out, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("docker run: %v: %s", err, out)
	}
	if strings.TrimSpace(string(out)) != "1" {
		return fmt.Errorf("docker run printed %q", out)
	}
	return nil
}

// runtimeRows measures warm, back-to-back, cold and session latency, and
// docker run, under one OCI runtime, each in a fresh server: the rows
// that show what gVisor costs beside runc.
func (b *bench) runtimeRows(ctx context.Context, serveArgs []string, runtime string) []Row {
	rows := b.latencyRows(ctx, serveArgs, " ["+runtime+"]", "PYBOX_RUNTIME="+runtime)
	row, err := b.measure(scenario{name: "docker run --rm --runtime " + runtime + " IMAGE python -c 'print(1)'",
		call: func(int) error { return dockerRunPrint1(ctx, b.image, "--runtime", runtime) }})
	if err != nil {
		row.Skipped = err.Error()
	}
	return append(rows, row)
}

// latencyRows measures warm, back-to-back, cold and session latency in
// fresh servers with env added, each row's name ending in tag.
func (b *bench) latencyRows(ctx context.Context, serveArgs []string, tag string, env ...string) []Row {
	var rows []Row
	measure := func(sc scenario) {
		row, err := b.measure(sc)
		if err != nil {
			row = Row{Name: sc.name, Skipped: err.Error()}
		}
		row.Note = sc.note
		rows = append(rows, row)
	}
	print1 := map[string]any{"code": "print(1)"}
	for _, pool := range []string{"2", "0"} {
		cs, stop, err := b.connect(ctx, serveArgs, append(slices.Clone(env), "PYBOX_WARM_POOL="+pool)...)
		if err != nil {
			return append(rows, Row{Name: "execute_code" + tag, Skipped: err.Error()})
		}
		exec := func(args map[string]any) func(int) error {
			return func(int) error { return callExpect(ctx, cs, "execute_code", args, "1\n") }
		}
		if pool == "0" {
			measure(scenario{name: "cold: execute_code print(1), no warm pool" + tag, note: "container created and started per call", call: exec(print1)})
		} else {
			measure(scenario{name: "warm: execute_code print(1), calls 0.5 s apart" + tag, pause: 500 * time.Millisecond, call: exec(print1)})
			measure(scenario{name: "execute_code print(1), back to back" + tag, call: exec(print1)})
			measure(scenario{name: "session: execute_code print(1) in a live session" + tag, setup: settle, call: exec(map[string]any{"code": "print(1)", "session_id": "bench"})})
		}
		stop()
	}
	return rows
}

// burstRow measures 20 back-to-back calls after an idle pause and counts
// those that took the cold path (a container created for the run itself,
// not a pool refill), from the daemon's events.
func (b *bench) burstRow(ctx context.Context, cs *mcp.ClientSession) Row {
	const calls = 20
	name := "burst: 20 back-to-back execute_code print(1) after 2 s idle"
	fmt.Fprintf(b.stderr, "bench: %s ...\n", name)
	time.Sleep(2 * time.Second) // the pool back at its floor, as after a pause
	// Counted from the daemon's live stream: its ring of past events is
	// overwritten within seconds on a busy daemon.
	stop := b.eng.WatchContainerCreates(ctx, map[string]string{"pybox.pid": strconv.Itoa(b.serverPID), "pybox.role": "run"}, "", "")
	ds := make([]time.Duration, 0, calls)
	for range calls {
		t := time.Now()
		if err := callExpect(ctx, cs, "execute_code", map[string]any{"code": "print(1)"}, "1\n"); err != nil {
			_, _ = stop() // the row is skipped: its count does not matter
			return Row{Name: name, Skipped: err.Error()}
		}
		ds = append(ds, time.Since(t))
	}
	row := summarise(name, ds)
	cold, err := stop()
	if err != nil {
		row.Note = "cold path: unknown (" + err.Error() + ")"
		return row
	}
	row.Note = fmt.Sprintf("cold path: %d of %d (target at most 2)", cold, calls)
	return row
}

// concurrentRow measures 4 callers making 25 calls each at once on the
// one connection (at -n 20; each makes 5n/4: the row follows -n as the
// others do): latency per call and throughput.
func (b *bench) concurrentRow(ctx context.Context, cs *mcp.ClientSession) Row {
	callers, each := 4, loadCalls(b.n)
	sessions := make([]*mcp.ClientSession, callers)
	for i := range sessions {
		sessions[i] = cs
	}
	calls := 0
	var mu sync.Mutex
	more := func() bool { mu.Lock(); defer mu.Unlock(); calls++; return calls <= callers*each }
	row := b.loadRow(ctx, fmt.Sprintf("%d concurrent callers x %d execute_code print(1)", callers, each), sessions, more)
	if row.Skipped == "" {
		row.Note += " (target >= 15 runs/s, 0 failures)"
	}
	return row
}

// loadCalls is each concurrent caller's number of calls at -n n: 25 at
// the default 20, at least 2.
func loadCalls(n int) int { return max(2, n*5/4) }

// loadSpan is how long the HTTP clients' row calls at -n n: 20 s at the
// default 20, at least 2 s.
func loadSpan(n int) time.Duration { return max(2*time.Second, time.Duration(n)*time.Second) }

// loadRow has each session call execute_code print(1) in a loop, all at
// once, while more says so, and summarises latency and throughput.
func (b *bench) loadRow(ctx context.Context, name string, sessions []*mcp.ClientSession, more func() bool) Row {
	fmt.Fprintf(b.stderr, "bench: %s ...\n", name)
	var mu sync.Mutex
	var ds []time.Duration
	failures := 0
	var wg sync.WaitGroup
	start := time.Now()
	for _, cs := range sessions {
		wg.Go(func() {
			for more() {
				t := time.Now()
				err := callExpect(ctx, cs, "execute_code", map[string]any{"code": "print(1)"}, "1\n")
				mu.Lock()
				if err != nil {
					failures++
				} else {
					ds = append(ds, time.Since(t))
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	wall := time.Since(start)
	if len(ds) == 0 {
		return Row{Name: name, Skipped: "every call failed"}
	}
	row := summarise(name, ds)
	row.Note = fmt.Sprintf("%.1f runs/s, %d failures", float64(len(ds))/wall.Seconds(), failures)
	return row
}

// summarise turns latencies into a row.
func summarise(name string, ds []time.Duration) Row {
	slices.Sort(ds)
	return Row{Name: name, N: len(ds), MinMS: ms(ds[0]), P50MS: ms(percentile(ds, 50)), P95MS: ms(percentile(ds, 95))}
}
