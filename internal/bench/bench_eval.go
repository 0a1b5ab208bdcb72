package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"
)

// EvalRow is one way of running a batch, measured.
type EvalRow struct {
	Name      string  `json:"name"`
	Samples   int     `json:"samples"`
	Seconds   float64 `json:"seconds"`
	PerSecond float64 `json:"samples_per_s"`
	NotPassed int     `json:"not_passed"`                    // samples that should pass and did not
	Floor     float64 `json:"floor_samples_per_s,omitempty"` // -eval-floor: the floor's rate measured beside this row
	// -eval-floor, on Linux: the host's busy CPU time over the row per
	// sample (every process's: on a shared host others' work counts too),
	// and the 1-minute load average at its start and end.
	HostCPUms float64 `json:"host_cpu_ms_per_sample,omitempty"`
	// ClientCPUms: of it, the client's (the bench's own API calls, the
	// docker CLI, or pybox eval) per sample.
	ClientCPUms float64 `json:"client_cpu_ms_per_sample,omitempty"`
	// DaemonCPUms: the daemon's (dockerd, containerd) and the containers'
	// processes' per sample (see daemonCPU).
	DaemonCPUms float64   `json:"daemon_cpu_ms_per_sample,omitempty"`
	Load        []float64 `json:"load,omitempty"` // start, end
	Note        string    `json:"note,omitempty"`
	Skipped     string    `json:"skipped,omitempty"`
}

// EvalReport is `pybox bench --eval`'s JSON form.
type EvalReport struct {
	Image string    `json:"image"`
	Rows  []EvalRow `json:"rows"`
}

// The work of one "real work" sample: primes by trial division, a sort
// and a JSON round trip (about 50 ms of CPU here), checked by its test.
const evalWorkCode = `import json, random

def primes(n):
    out = []
    for k in range(2, n):
        if all(k % p for p in out if p * p <= k):
            out.append(k)
    return out

def roundtrip(xs):
    return json.loads(json.dumps(sorted(xs)))
`

const evalWorkTest = `assert len(primes(20000)) == 2262
random.seed(%d)
xs = [random.random() for _ in range(20000)]
assert roundtrip(xs) == sorted(xs)
`

// sample is one program of a benchmark batch: a `pybox eval` line.
type sample struct {
	ID         json.RawMessage
	Code, Test *string
}

// evalBenchSets are the two batches: trivial and real work.
func evalBenchSets(trivial, work int) (triv, real []sample) {
	for i := range trivial {
		code := fmt.Sprintf("print(%d)\n", i)
		triv = append(triv, sample{ID: json.RawMessage(fmt.Sprint(i)), Code: &code})
	}
	for i := range work {
		code, test := evalWorkCode, fmt.Sprintf(evalWorkTest, i)
		real = append(real, sample{ID: json.RawMessage(fmt.Sprint(i)), Code: &code, Test: &test})
	}
	return triv, real
}

// benchEval measures `pybox eval` on both batches, against a `docker run
// --rm` loop and a `pybox run` loop over the first loopN samples of each
// (those are slow enough that a sample of the batch shows their rate).
func benchEval(ctx context.Context, image string, forward, evalForward []string, trivial, work, loopN int, jsonOut string, stdout, stderr io.Writer) error {
	self, dir, err := benchScratch("pybox-bench-eval-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	triv, real := evalBenchSets(trivial, work)
	rep := EvalReport{Image: image}
	for _, set := range []struct {
		label   string
		samples []sample
	}{{"trivial (print)", triv}, {"real work (primes, sort, JSON; with tests)", real}} {
		fmt.Fprintf(stderr, "bench: pybox eval, %d samples, %s\n", len(set.samples), set.label)
		rep.Rows = append(rep.Rows, benchEvalBatch(ctx, self, evalForward, dir, set.label, set.samples))
		n := min(loopN, len(set.samples))
		fmt.Fprintf(stderr, "bench: docker run loop, %d samples, %s\n", n, set.label)
		rep.Rows = append(rep.Rows, benchLoop(ctx, "docker run --rm loop, "+set.label, set.samples[:n], func(s sample) error {
			return dockerRunSample(ctx, image, s)
		}))
		fmt.Fprintf(stderr, "bench: pybox run loop, %d samples, %s\n", n, set.label)
		rep.Rows = append(rep.Rows, benchLoop(ctx, "pybox run per file loop, "+set.label, set.samples[:n], func(s sample) error {
			return pyboxRunSample(ctx, self, forward, dir, s)
		}))
	}
	return writeEvalReport(rep, jsonOut, stdout)
}

// benchEvalBatch runs one batch through a child `pybox eval` (forward:
// the settings it has).
func benchEvalBatch(ctx context.Context, self string, forward []string, dir, label string, samples []sample) EvalRow {
	row := EvalRow{Name: "pybox eval, " + label, Samples: len(samples), Note: "fresh container per sample"}
	in, out := filepath.Join(dir, "samples.jsonl"), filepath.Join(dir, "results.jsonl")
	var b bytes.Buffer
	for _, s := range samples {
		line, _ := json.Marshal(map[string]any{"id": s.ID, "code": s.Code, "test": s.Test}) // strings always marshal
		b.Write(append(line, '\n'))
	}
	os.Remove(out)
	if err := os.WriteFile(in, b.Bytes(), 0o644); err != nil {
		row.Skipped = err.Error()
		return row
	}
	cmd := exec.CommandContext(ctx, self, append(append([]string{"eval", "--progress=never"}, forward...), "-o", out, in)...)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	start := time.Now()
	if err := cmd.Run(); err != nil {
		row.Skipped = fmt.Sprintf("%v: %s", err, lastLine(errb.String()))
		return row
	}
	row.Seconds = round(time.Since(start).Seconds())
	row.PerSecond = round(float64(len(samples)) / row.Seconds)
	res, err := os.ReadFile(out)
	if err != nil {
		row.Skipped = err.Error()
		return row
	}
	row.NotPassed = len(samples) - bytes.Count(res, []byte(`"passed":true`))
	return row
}

// benchLoop runs samples one after another with run.
func benchLoop(ctx context.Context, name string, samples []sample, run func(sample) error) EvalRow {
	row := EvalRow{Name: name, Samples: len(samples), Note: "one at a time, as such loops are written"}
	start := time.Now()
	for _, s := range samples {
		if ctx.Err() != nil {
			row.Skipped = ctx.Err().Error()
			return row
		}
		if err := run(s); err != nil {
			row.NotPassed++
		}
	}
	row.Seconds = round(time.Since(start).Seconds())
	row.PerSecond = round(float64(len(samples)) / row.Seconds)
	return row
}

// program joins a sample's code and tests as a plain harness would.
func (s sample) program() string {
	p := *s.Code
	if s.Test != nil {
		p += "\n" + *s.Test
	}
	return p
}

func dockerRunSample(ctx context.Context, image string, s sample) error {
	return exec.CommandContext(ctx, "docker", "run", "--rm", "--network", "none", image, "/opt/venv/bin/python", "-c", s.program()).Run()
}

func pyboxRunSample(ctx context.Context, self string, forward []string, dir string, s sample) error {
	file := filepath.Join(dir, "sample.py")
	if err := os.WriteFile(file, []byte(s.program()), 0o644); err != nil {
		return err
	}
	return exec.CommandContext(ctx, self, append(append([]string{"run"}, forward...), file)...).Run()
}

func writeEvalReport(rep EvalReport, jsonPath string, stdout io.Writer) error {
	if jsonPath != "" {
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		if jsonPath == "-" {
			_, err = stdout.Write(append(b, '\n'))
			return err
		}
		if err := os.WriteFile(jsonPath, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\tsamples\tseconds\tsamples/s\tnot passed\tnote")
	for _, r := range rep.Rows {
		if r.Skipped != "" {
			fmt.Fprintf(tw, "%s\t%d\t-\t-\t-\tskipped: %s\n", r.Name, r.Samples, r.Skipped)
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%d\t%s\n", r.Name, r.Samples, r.Seconds, r.PerSecond, r.NotPassed, r.Note)
	}
	tw.Flush()
	for _, label := range []string{"trivial", "real work"} {
		var eval, docker, run *EvalRow
		for i := range rep.Rows {
			r := &rep.Rows[i]
			switch {
			case r.Skipped != "" || !strings.Contains(r.Name, label):
			case strings.HasPrefix(r.Name, "pybox eval"):
				eval = r
			case strings.HasPrefix(r.Name, "docker run"):
				docker = r
			case strings.HasPrefix(r.Name, "pybox run"):
				run = r
			}
		}
		if eval != nil && docker != nil && run != nil {
			fmt.Fprintf(stdout, "%s: pybox eval %.1f samples/s = %.1fx a docker run loop, %.1fx a pybox run loop\n",
				label, eval.PerSecond, eval.PerSecond/docker.PerSecond, eval.PerSecond/run.PerSecond)
		}
	}
	return nil
}

// lastLine is the last non-empty line of s.
func lastLine(s string) string {
	s = strings.TrimSpace(s)
	return s[strings.LastIndexByte(s, '\n')+1:]
}
