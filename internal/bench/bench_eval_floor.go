package bench

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/pybox-dev/pybox/internal/app"
	"github.com/pybox-dev/pybox/internal/engine"
)

// floorProblems is the size of HumanEval: the floor batch has as many
// trivial problems.
const floorProblems = 164

// floorBench measures `pybox eval --problems` on floorProblems trivial
// problems with 1 and 5 samples each, a `docker run --rm` loop over the
// same programs, and the floor: bare containers of `true` created,
// started, waited for and removed through the Docker API, all jobs at
// once.
type floorBench struct {
	self    string
	forward []string // the settings `pybox eval` has, as flags
	image   string
	runtime string
	jobs    int
	eng     *engine.Client
	stderr  io.Writer
}

// The floor is measured in four parts, before, between and after the
// other rows, and each row is compared with the parts beside it: on a
// shared machine the load drifts over minutes.
func (b *floorBench) run(ctx context.Context, dir string) []EvalRow {
	var rows []EvalRow
	floors := []EvalRow{measured(func() EvalRow { return b.floor(ctx) })}
	for _, per := range []int{1, 5} {
		fmt.Fprintf(b.stderr, "bench: pybox eval --problems, %d problems x %d samples, -j %d\n", floorProblems, per, b.jobs)
		rows = append(rows, measured(func() EvalRow { return b.evalProblems(ctx, dir, per) }))
		floors = append(floors, measured(func() EvalRow { return b.floor(ctx) }))
	}
	code := "def f():\n    return 1\n\ndef check(c):\n    assert c() == 1\n\ncheck(f)\n"
	fmt.Fprintf(b.stderr, "bench: docker run --rm, %d at once\n", b.jobs)
	rows = append(rows, measured(func() EvalRow {
		return b.parallel(ctx, "docker run --rm, "+fmt.Sprint(b.jobs)+" at once", floorProblems, func() error {
			args := []string{"run", "--rm", "--network", "none"}
			if b.runtime != "" {
				args = append(args, "--runtime", b.runtime)
			}
			return exec.CommandContext(ctx, "docker", append(args, b.image, "/opt/venv/bin/python", "-c", code)...).Run()
		})
	}))
	floors = append(floors, measured(func() EvalRow { return b.floor(ctx) }))
	total := EvalRow{Name: "floor: create+start+wait+remove `true`, " + fmt.Sprint(b.jobs) + " at once"}
	cpu, client, daemon := 0.0, 0.0, 0.0
	for i, f := range floors {
		cpu += f.HostCPUms * float64(f.Samples)
		client += f.ClientCPUms * float64(f.Samples)
		daemon += f.DaemonCPUms * float64(f.Samples)
		if len(f.Load) == 2 && len(total.Load) == 0 {
			total.Load = f.Load
		} else if len(f.Load) == 2 { // the lowest and the highest of the parts
			total.Load = []float64{min(total.Load[0], f.Load[0], f.Load[1]), max(total.Load[1], f.Load[0], f.Load[1])}
		}
		if i < len(rows) && f.PerSecond > 0 && floors[i+1].PerSecond > 0 {
			rows[i].Floor = round((f.PerSecond + floors[i+1].PerSecond) / 2)
		}
		total.Samples, total.Seconds, total.NotPassed = total.Samples+f.Samples, total.Seconds+f.Seconds, total.NotPassed+f.NotPassed
		total.Skipped = cmp.Or(total.Skipped, f.Skipped)
	}
	if total.Skipped == "" {
		total.Seconds, total.PerSecond = round(total.Seconds), round(float64(total.Samples)/total.Seconds)
		total.HostCPUms, total.ClientCPUms, total.DaemonCPUms = round(cpu/float64(total.Samples)), round(client/float64(total.Samples)), round(daemon/float64(total.Samples))
		total.Note = fmt.Sprintf("in %d parts, before, between and after the rows above", len(floors))
	}
	return append(rows, total)
}

// measured runs row and adds the host's CPU time per sample and the load
// over it (none where hostCPU cannot read them).
func measured(row func() EvalRow) EvalRow {
	busy0, load0, ok0 := hostCPU()
	client0 := clientCPU()
	daemon0, okd := daemonCPU()
	r := row()
	busy1, load1, ok1 := hostCPU()
	if ok0 && ok1 && r.Samples > 0 && r.Skipped == "" {
		r.HostCPUms = round(1000 * (busy1 - busy0) / float64(r.Samples))
		r.ClientCPUms = round(1000 * (clientCPU() - client0) / float64(r.Samples))
		if daemon1, ok := daemonCPU(); ok && okd {
			r.DaemonCPUms = round(1000 * (daemon1 - daemon0) / float64(r.Samples))
		}
		r.Load = []float64{load0, load1}
	}
	return r
}

// floor measures a quarter of the floor's containers.
func (b *floorBench) floor(ctx context.Context) EvalRow {
	fmt.Fprintf(b.stderr, "bench: floor (create+start+wait+remove of true), %d at once\n", b.jobs)
	return b.parallel(ctx, "floor", floorProblems/4, func() error {
		spec := engine.Spec{Config: &container.Config{Image: b.image, Cmd: []string{"true"}, NetworkDisabled: true},
			Host: &container.HostConfig{NetworkMode: "none", Runtime: b.runtime}}
		x, err := b.eng.Run(ctx, spec)
		if err == nil && x.Code != 0 {
			err = fmt.Errorf("exit %d", x.Code)
		}
		return err
	})
}

// evalProblems runs a child `pybox eval --problems` on the trivial
// problems with per samples each.
func (b *floorBench) evalProblems(ctx context.Context, dir string, per int) EvalRow {
	row := EvalRow{Name: fmt.Sprintf("pybox eval --problems, %d x %d samples, -j %d", floorProblems, per, b.jobs), Samples: floorProblems * per}
	probs, in := filepath.Join(dir, "problems.jsonl"), filepath.Join(dir, fmt.Sprintf("samples-%d.jsonl", per))
	var p, s bytes.Buffer
	for i := range floorProblems {
		task := fmt.Sprintf("Trivial/%d", i)
		line, _ := json.Marshal(map[string]string{"task_id": task, "prompt": fmt.Sprintf("def f%d():\n", i), "entry_point": fmt.Sprintf("f%d", i),
			"test": "def check(c):\n    assert c() == 1\n"}) // strings always marshal
		p.Write(append(line, '\n'))
		for range per {
			line, _ := json.Marshal(map[string]string{"task_id": task, "completion": "    return 1\n"})
			s.Write(append(line, '\n'))
		}
	}
	out := in + "_results.jsonl"
	os.Remove(out)
	if err := os.WriteFile(probs, p.Bytes(), 0o644); err != nil {
		row.Skipped = err.Error()
		return row
	}
	if err := os.WriteFile(in, s.Bytes(), 0o644); err != nil {
		row.Skipped = err.Error()
		return row
	}
	args := append(append([]string{"eval", "--progress=never", "-j", fmt.Sprint(b.jobs)}, b.forward...), "--problems", probs, in)
	cmd := exec.CommandContext(ctx, b.self, args...)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	start := time.Now()
	if err := cmd.Run(); err != nil {
		row.Skipped = fmt.Sprintf("%v: %s", err, lastLine(errb.String()))
		return row
	}
	row.Seconds = round(time.Since(start).Seconds())
	row.PerSecond = round(float64(row.Samples) / row.Seconds)
	res, err := os.ReadFile(out)
	if err != nil {
		row.Skipped = err.Error()
		return row
	}
	row.NotPassed = row.Samples - bytes.Count(res, []byte(`"passed":true`))
	row.Note = "fresh container per sample; wall time includes pybox's start and its warm pool's fill"
	return row
}

// parallel runs f n times, jobs at once.
func (b *floorBench) parallel(ctx context.Context, name string, n int, f func() error) EvalRow {
	row := EvalRow{Name: name, Samples: n}
	var next, failed atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range b.jobs {
		wg.Go(func() {
			for next.Add(1) <= int64(n) && ctx.Err() == nil {
				if err := f(); err != nil {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		row.Skipped = ctx.Err().Error()
		return row
	}
	row.Seconds = round(time.Since(start).Seconds())
	row.PerSecond = round(float64(n) / row.Seconds)
	row.NotPassed = int(failed.Load())
	return row
}

// benchEvalFloor runs the floor benchmark and reports it, with each row's
// rate as a share of the floor's measured beside it.
func benchEvalFloor(ctx context.Context, a *app.App, forward []string, jsonOut string, stdout, stderr io.Writer) error {
	self, dir, err := benchScratch("pybox-bench-floor-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	b := &floorBench{self: self, forward: forward, image: a.Image, runtime: a.Config.Runtime, jobs: max(a.Config.MaxConcurrent, 1), eng: a.Engine, stderr: stderr}
	rep := EvalReport{Image: a.Image, Rows: b.run(ctx, dir)}
	for i := range rep.Rows {
		r := &rep.Rows[i]
		if r.HostCPUms > 0 && len(r.Load) == 2 {
			r.Note = fmt.Sprintf("CPU ms/sample: host %.0f, daemon and containers %.0f, client %.1f; load %.0f-%.0f; ",
				r.HostCPUms, r.DaemonCPUms, r.ClientCPUms, r.Load[0], r.Load[1]) + r.Note
		}
		if r.Floor > 0 && r.Skipped == "" {
			r.Note = fmt.Sprintf("%.0f%% of the floor's rate beside it (%.1f/s); ", 100*r.PerSecond/r.Floor, r.Floor) + r.Note
		}
	}
	return writeEvalReport(rep, jsonOut, stdout)
}

// benchScratch is this executable, to run as a child, and a fresh
// folder for a benchmark's files (the caller removes it).
func benchScratch(prefix string) (self, dir string, err error) {
	if self, err = os.Executable(); err != nil {
		return "", "", err
	}
	dir, err = os.MkdirTemp("", prefix)
	return self, dir, err
}
