//go:build !windows

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pybox-dev/pybox/internal/contract"
	"github.com/pybox-dev/pybox/internal/testenv"
)

// evalCase is one kind of sample of the generated batch and the verdict
// it must get.
type evalCase struct {
	name   string
	sample map[string]any
	want   func(r evalResult) bool
}

func passed(r evalResult) bool     { return r.Passed && r.ExitCode == 0 && r.Error == "" }
func failedExit(r evalResult) bool { return !r.Passed && r.Error == evalExit && r.ExitCode != 0 }

// evalCases mixes pass, fail, exception, timeout, OOM, fork bomb, output
// flood, stdin and hostile attempts at the verdict or at other samples.
func evalCases() []evalCase {
	return []evalCase{
		{"pass", map[string]any{"code": "def add(a, b):\n    return a + b\n", "test": "assert add(2, 3) == 5\n"}, passed},
		{"fail", map[string]any{"code": "def add(a, b):\n    return a - b\n", "test": "assert add(2, 3) == 5\n"}, func(r evalResult) bool {
			return failedExit(r) && r.ExitCode == 1 && r.Exception == "AssertionError"
		}},
		{"exception", map[string]any{"code": "raise ValueError('nope')\n"}, func(r evalResult) bool {
			return failedExit(r) && r.Exception == "ValueError" && strings.Contains(r.Stderr, "ValueError: nope")
		}},
		{"syntax", map[string]any{"code": "def broken(:\n"}, func(r evalResult) bool { return failedExit(r) && r.Exception == "SyntaxError" }},
		{"exit3", map[string]any{"code": "import sys\nsys.exit(3)\n"}, func(r evalResult) bool { return failedExit(r) && r.ExitCode == 3 }},
		{"timeout", map[string]any{"code": "while True:\n    pass\n", "timeout_s": 1}, func(r evalResult) bool {
			return !r.Passed && r.TimedOut && r.Error == evalTimeout
		}},
		{"oom", map[string]any{"code": "x = bytearray(600 << 20)\nx[::4096] = b'x' * len(x[::4096])\n"}, func(r evalResult) bool {
			return !r.Passed && r.OOMKilled && r.Error == evalOOM
		}},
		{"forkbomb", map[string]any{"code": "import os\nwhile True:\n    os.fork()\n", "timeout_s": 5}, func(r evalResult) bool { return !r.Passed }},
		{"flood", map[string]any{"code": "import sys\nfor _ in range(100):\n    sys.stdout.write('y' * 100_000)\n"}, func(r evalResult) bool {
			return passed(r) && r.Truncated && len(r.Stdout) <= 64<<10
		}},
		{"stdin", map[string]any{"code": "import sys\nprint(sys.stdin.read().strip()[::-1])\n", "stdin": "olleh\n"}, func(r evalResult) bool {
			return passed(r) && r.Stdout == "hello\n"
		}},
		{"no-stdin", map[string]any{"code": "input()\n"}, func(r evalResult) bool { return failedExit(r) && r.Exception == "EOFError" }},
		{"threads", map[string]any{"code": "import threading, time\ndone = []\nt = threading.Thread(target=lambda: (time.sleep(0.2), done.append(1)))\nt.start()\nt.join()\n", "test": "assert done == [1]\n"}, passed},
		// Hostile: at its own verdict.
		{"exit0-before-tests", map[string]any{"code": "import sys\nsys.exit(0)\n", "test": "assert False, 'the tests ran'\n"}, func(r evalResult) bool {
			return failedExit(r) && strings.Contains(r.Stderr, "before its tests ran")
		}},
		{"os-exit0-before-tests", map[string]any{"code": "import os\nos._exit(0)\n", "test": "assert False, 'the tests ran'\n"}, func(r evalResult) bool {
			return failedExit(r) && strings.Contains(r.Stderr, "before its tests finished")
		}},
		{"exec-true-before-tests", map[string]any{"code": "import os\nos.execv('/bin/true', ['true'])\n", "test": "assert False\n"}, func(r evalResult) bool {
			return failedExit(r) && strings.Contains(r.Stderr, "before its tests finished")
		}},
		{"thread-exit0-mid-tests", map[string]any{"code": "import os, threading, time\nthreading.Timer(0.3, lambda: os._exit(0)).start()\ndef slow():\n    time.sleep(2)\n    return False\n", "test": "assert slow()\n"}, func(r evalResult) bool {
			return failedExit(r) && strings.Contains(r.Stderr, "before its tests finished")
		}},
		{"sys-exit0-in-tests", map[string]any{"code": "import sys\ndef add(a, b):\n    sys.exit(0)\n", "test": "assert add(2, 3) == 5\n"}, func(r evalResult) bool {
			return failedExit(r) && strings.Contains(r.Stderr, "before its tests finished")
		}},
		{"atexit-exit0", map[string]any{"code": "import atexit, os\natexit.register(lambda: os._exit(0))\n", "test": "assert False\n"}, func(r evalResult) bool {
			return failedExit(r) && r.Exception == "AssertionError"
		}},
		{"forged-frame", map[string]any{"code": "import sys\nfor n in ('-', 'x' * 32):\n    sys.stdout.write('PYBOX %s done 10\\n{\"code\": 0}' % n)\n    sys.stderr.write('PYBOX %s done 10\\n{\"code\": 0}' % n)\nsys.stdout.flush()\nsys.exit(1)\n"}, func(r evalResult) bool {
			return failedExit(r) && r.ExitCode == 1 && strings.Contains(r.Stdout, "PYBOX")
		}},
		{"kill-pid1", map[string]any{"code": "import os, signal\nfor s in (signal.SIGKILL, signal.SIGTERM):\n    try:\n        os.kill(1, s)\n    except OSError:\n        pass\n", "test": "assert False, 'still here'\n"}, func(r evalResult) bool {
			// runc: PID 1 ignores both, the test fails. gVisor lets the
			// SIGKILL end the sandbox (exit 137). Never a pass.
			return failedExit(r) && (r.Exception == "AssertionError" || r.ExitCode == 137)
		}},
		// Hostile: at other samples. Every one writes a marker where a later
		// sample would find it if containers or workspaces were shared, and
		// fails if it finds one.
		{"leave-files", map[string]any{"code": "import glob, os, subprocess\nfound = glob.glob('/workspace/mark-*') + glob.glob('/tmp/mark-*')\nopen('/workspace/mark-%d' % os.getpid(), 'w').write('x')\nopen('/tmp/mark-%d' % os.getpid(), 'w').write('x')\nsubprocess.Popen(['sleep', '300'])\nprint(os.listdir('/workspace'))\n",
			"test": "assert not found, found\n"}, func(r evalResult) bool { return passed(r) && !strings.Contains(r.Stdout, "outputs") }},
		{"network", map[string]any{"code": "import socket\ntry:\n    socket.create_connection(('1.1.1.1', 53), timeout=1)\n    reached = True\nexcept OSError:\n    reached = False\n", "test": "assert not reached\n"}, passed},
	}
}

// TestEvalVerdicts runs a generated batch of a few hundred samples and
// checks every verdict, and that the results come in input order, once
// each, with nothing left behind.
func TestEvalVerdicts(t *testing.T) {
	longTest(t)
	testenv.RuntimeImage(t, testenv.Docker(t), "base")
	cases := evalCases()
	const rounds = 12
	var lines []string
	want := map[string]evalCase{}
	var ids []string
	for i := range rounds {
		for _, c := range cases {
			id := fmt.Sprintf("%s-%d", c.name, i)
			s := map[string]any{"id": id}
			for k, v := range c.sample {
				s[k] = v
			}
			b, _ := json.Marshal(s)
			lines = append(lines, string(b))
			want[id] = c
			ids = append(ids, id)
		}
	}
	dir := t.TempDir()
	in := filepath.Join(dir, "samples.jsonl")
	os.WriteFile(in, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
	out := filepath.Join(dir, "results.jsonl")
	start := time.Now()
	_, stderr, code := runEval(t, "-o", out, in)
	if code != 0 {
		t.Fatalf("pybox eval: exit %d\n%s", code, stderr)
	}
	t.Logf("%d samples in %v: %s", len(ids), time.Since(start).Round(time.Second), lastLine(stderr))
	results := readEvalResults(t, out)
	if len(results) != len(ids) {
		t.Fatalf("%d results for %d samples", len(results), len(ids))
	}
	bad := 0
	for i, r := range results {
		var id string
		json.Unmarshal(r.ID, &id)
		if id != ids[i] {
			t.Fatalf("result %d is for %s; want %s (input order)", i, id, ids[i])
		}
		if c := want[id]; !c.want(r) {
			if bad++; bad <= 10 {
				t.Errorf("%s: unexpected verdict: %+v", id, r)
			}
		}
	}
	wantSummary := fmt.Sprintf("%d of %d samples have results (%d run now)", len(ids), len(ids), len(ids))
	if !strings.Contains(stderr, wantSummary) {
		t.Errorf("the summary does not say %q:\n%s", wantSummary, stderr)
	}
}

// TestEvalContainersPerSample: a batch creates one container per sample
// and no other (no probe, no warm container past the samples still to
// run), one at a time and four at a time: counted from the daemon's live
// stream of creations (engine.WatchCreates), by the lease label of the
// batch's own state folder.
func TestEvalContainersPerSample(t *testing.T) {
	parallelTest(t)
	eng := testenv.Docker(t)
	testenv.RuntimeImage(t, eng, "base")
	const samples = 10
	var lines []string
	for i := range samples {
		lines = append(lines, fmt.Sprintf(`{"id": %d, "code": "def inc(x):\n    return x + 1\n", "test": "assert inc(%d) == %d\n"}`, i, i, i+1))
	}
	dir := t.TempDir()
	in := filepath.Join(dir, "samples.jsonl")
	os.WriteFile(in, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
	for _, j := range []string{"1", "4"} {
		state := t.TempDir()
		roles := map[string]int{}
		stop := eng.WatchCreates(t.Context(), func(labels map[string]string) bool {
			if !strings.HasPrefix(labels[contract.LabelLease], state+"/") {
				return false
			}
			roles[labels[contract.LabelRole]]++
			return true
		})
		out := filepath.Join(dir, "results-"+j+".jsonl")
		_, stderr, code := runEvalEnv(t, []string{"PYBOX_STATE_DIR=" + state}, "-j", j, "-o", out, in)
		created, err := stop()
		if err != nil {
			t.Fatal(err)
		}
		if code != 0 {
			t.Fatalf("-j %s: exit %d\n%s", j, code, stderr)
		}
		for _, r := range readEvalResults(t, out) {
			if !r.Passed {
				t.Errorf("-j %s: %s did not pass: %+v", j, r.ID, r)
			}
		}
		t.Logf("-j %s: %d containers for %d samples, by role: %v", j, created, samples, roles)
		if created != samples || roles["probe"] != 0 {
			t.Errorf("-j %s: the batch created %d containers (by role: %v); want one per sample, %d", j, created, roles, samples)
		}
	}
}

// TestEvalDeterministic: the same batch gives the same verdicts one at a
// time and four at a time, under each runtime.
func TestEvalDeterministic(t *testing.T) {
	longTest(t)
	eachRuntime(t, func(t *testing.T) {
		testenv.RuntimeImage(t, testenv.Docker(t), "base")
		var lines []string
		for i, c := range evalCases() {
			s := map[string]any{"id": i}
			for k, v := range c.sample {
				s[k] = v
			}
			b, _ := json.Marshal(s)
			lines = append(lines, string(b))
		}
		dir := t.TempDir()
		in := filepath.Join(dir, "samples.jsonl")
		os.WriteFile(in, []byte(strings.Join(lines, "\n")), 0o644) // no newline at the end: fine too
		verdicts := map[string][]string{}
		for _, j := range []string{"1", "4"} {
			out := filepath.Join(dir, "results-"+j+".jsonl")
			args := []string{"-j", j, "-o", out, in}
			if rt := serverRuntime(t); rt != "" {
				args = append([]string{"--runtime", rt}, args...)
			}
			if _, stderr, code := runEval(t, args...); code != 0 {
				t.Fatalf("-j %s: exit %d\n%s", j, code, stderr)
			}
			for i, r := range readEvalResults(t, out) {
				if c := evalCases()[i]; !c.want(r) {
					t.Errorf("-j %s, %s: unexpected verdict: %+v", j, c.name, r)
				}
				// The pass/fail verdict; the class of a failure may differ
				// (a fork bomb meets the process or the memory limit first).
				verdicts[j] = append(verdicts[j], fmt.Sprintf("%s passed=%v", r.ID, r.Passed))
			}
		}
		if a, b := strings.Join(verdicts["1"], "\n"), strings.Join(verdicts["4"], "\n"); a != b {
			t.Errorf("verdicts differ with concurrency:\n-j 1:\n%s\n-j 4:\n%s", a, b)
		}
	})
}

// TestEvalResume: a results file with some results and a cut-off last
// line is taken up where it stopped: the cut line is dropped, the ids
// done are not run again, and the file ends with every result once, in
// input order. Another batch's results file is refused.
func TestEvalResume(t *testing.T) {
	parallelTest(t)
	testenv.RuntimeImage(t, testenv.Docker(t), "base")
	dir := t.TempDir()
	in := filepath.Join(dir, "samples.jsonl")
	var lines []string
	for i := range 10 {
		lines = append(lines, fmt.Sprintf(`{"id": %d, "code": "print(%d)"}`, i, i))
	}
	os.WriteFile(in, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
	out := filepath.Join(dir, "results.jsonl")
	// Results for 0-3 "from an earlier run" (one of them marked so we can
	// tell it was kept, not run again), then half a line.
	var earlier []string
	for i := range 4 {
		earlier = append(earlier, fmt.Sprintf(`{"id":%d,"passed":true,"exit_code":0,"timed_out":false,"oom_killed":false,"duration_ms":1,"stdout":"earlier\n","stderr":""}`, i))
	}
	os.WriteFile(out, []byte(strings.Join(earlier, "\n")+"\n"+`{"id":4,"passed":tr`), 0o644)
	_, stderr, code := runEval(t, "-o", out, in)
	if code != 0 {
		t.Fatalf("resume: exit %d\n%s", code, stderr)
	}
	for _, want := range []string{"4 of 10 samples have results, 6 to run", "cut off", "10 of 10 samples have results (6 run now)"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, stderr)
		}
	}
	results := readEvalResults(t, out)
	if len(results) != 10 {
		t.Fatalf("%d results; want 10", len(results))
	}
	for i, r := range results {
		wantOut := fmt.Sprintf("%d\n", i)
		if i < 4 {
			wantOut = "earlier\n"
		}
		if string(r.ID) != strconv.Itoa(i) || r.Stdout != wantOut || !r.Passed {
			t.Errorf("result %d: %+v; want id %d with stdout %q", i, r, i, wantOut)
		}
	}
	// Run again: nothing to do, nothing changes.
	before, _ := os.ReadFile(out)
	if _, stderr, code := runEval(t, "-o", out, in); code != 0 || !strings.Contains(stderr, "(0 run now)") {
		t.Errorf("a finished batch run again: exit %d\n%s", code, stderr)
	}
	if after, _ := os.ReadFile(out); !bytes.Equal(before, after) {
		t.Errorf("a finished batch run again changed its results file")
	}
	// Another batch's results file is refused, and left alone.
	other := filepath.Join(dir, "other.jsonl")
	os.WriteFile(other, []byte(`{"id": "x", "code": "print(1)"}`+"\n"), 0o644)
	if _, stderr, code := runEval(t, "-o", out, other); code != evalBadInput || !strings.Contains(stderr, "is not in this batch") {
		t.Errorf("another batch's results file: exit %d\n%s", code, stderr)
	}
	if after, _ := os.ReadFile(out); !bytes.Equal(before, after) {
		t.Errorf("a refused results file was changed")
	}
}

// TestEvalInterrupted: Ctrl-C (SIGINT) stops the batch: exit 130, every
// container removed, the results file holds whole results only, in input
// order, and running the same command again completes it.
func TestEvalInterrupted(t *testing.T) {
	parallelTest(t)
	eng := testenv.Docker(t)
	testenv.RuntimeImage(t, eng, "base")
	dir := t.TempDir()
	in := filepath.Join(dir, "samples.jsonl")
	var lines []string
	for i := range 40 {
		lines = append(lines, fmt.Sprintf(`{"id": %d, "code": "import time\ntime.sleep(0.3)\nprint(%d)"}`, i, i))
	}
	os.WriteFile(in, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
	out := filepath.Join(dir, "results.jsonl")
	cmd, stderr := startEvalUntil(t, evalEnv(t), out, 3, "-o", out, in)
	running := testenv.Managed(t, eng, map[string]string{"pybox.pid": strconv.Itoa(cmd.Process.Pid)})
	cmd.Process.Signal(syscall.SIGINT)
	stopped := time.Now()
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != evalInterrupted {
		t.Fatalf("after SIGINT: %v; want exit %d\n%s", err, evalInterrupted, stderr.String())
	}
	t.Logf("stopped %v after SIGINT, with %d containers up before it", time.Since(stopped).Round(time.Millisecond), len(running))
	if len(running) == 0 {
		t.Errorf("no container of the batch was seen running: the test proves nothing about their removal")
	}
	if left := testenv.Managed(t, eng, map[string]string{"pybox.pid": strconv.Itoa(cmd.Process.Pid)}); len(left) > 0 {
		t.Errorf("containers left after Ctrl-C: %v", left)
	}
	if !strings.Contains(stderr.String(), "run the same command again") {
		t.Errorf("the interrupted batch does not say how to go on:\n%s", stderr.String())
	}
	partial := readEvalResults(t, out)
	if len(partial) == 0 || len(partial) == 40 {
		t.Fatalf("%d results after Ctrl-C; want some, not all", len(partial))
	}
	_, errText, code := runEval(t, "-o", out, in)
	if code != 0 {
		t.Fatalf("resume after Ctrl-C: exit %d\n%s", code, errText)
	}
	all := readEvalResults(t, out)
	for i, r := range all {
		if string(r.ID) != strconv.Itoa(i) || r.Stdout != fmt.Sprintf("%d\n", i) {
			t.Errorf("result %d after the resume: %+v", i, r)
		}
	}
	if len(all) != 40 {
		t.Errorf("%d results after the resume; want 40", len(all))
	}
}

// TestEvalBadInput: input that is not a batch gets exit 2 and names its
// line, before anything runs; pybox failing to run anything is 125.
func TestEvalBadInput(t *testing.T) {
	parallelTest(t)
	dir := t.TempDir()
	for _, tc := range []struct {
		name, input, want string
	}{
		{"not json", "{\"id\": 1, \"code\": \"print(1)\"}\n\nnot json\n", "line 3: not a JSON object"},
		{"no id", `{"code": "print(1)"}`, `line 1: "id" is missing`},
		{"no code", `{"id": "a"}`, `line 1: sample "a": "code" is missing`},
		{"code not a string", `{"id": "a", "code": 5}`, `line 1: field "code" must be a string`},
		{"duplicate id", "{\"id\": \"a\", \"code\": \"\"}\n{\"id\": \"a\", \"code\": \"\"}", `line 2: id "a" was already used on line 1`},
		{"bad timeout", `{"id": 1, "code": "", "timeout_s": -1}`, `"timeout_s" must be a positive number`},
		{"huge timeout", `{"id": 1, "code": "", "timeout_s": 100000}`, `(--max-timeout)`},
		{"bad environment", `{"id": 1, "code": "", "environment": "gpu"}`, `"environment" "gpu" is not a runtime variant`},
		{"bad requirement", `{"id": 1, "code": "", "requirements": ["numpy; rm -rf /"]}`, `line 1: sample 1: "requirements"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".jsonl")
			os.WriteFile(in, []byte(tc.input), 0o644)
			out, stderr, code := runEval(t, in)
			if code != evalBadInput || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr:\n%s\nwant exit 2 and %q", code, stderr, tc.want)
			}
			if out != "" {
				t.Errorf("results written for bad input: %q", out)
			}
		})
	}
	t.Run("no image", func(t *testing.T) {
		testenv.Docker(t)
		in := filepath.Join(dir, "ok.jsonl")
		os.WriteFile(in, []byte(`{"id": 1, "code": "print(1)"}`), 0o644)
		_, stderr, code := runEval(t, "--image", "pybox-test-no-such-image:1", in)
		if code != exitFailure || !strings.Contains(stderr, "pybox-test-no-such-image") {
			t.Errorf("a missing image: exit %d\n%s\nwant exit %d naming the image", code, stderr, exitFailure)
		}
	})
}

// evalEnv is the environment of a `pybox eval` under test.
func evalEnv(t *testing.T) []string {
	env := append(os.Environ(), "PYBOX_BUILD=never", "PYBOX_STATE_DIR="+t.TempDir(), "CODE_STORAGE_DIR="+t.TempDir())
	if rt := serverRuntime(t); rt != "" {
		env = append(env, "PYBOX_RUNTIME="+rt)
	}
	return env
}

// runEval runs `pybox eval args...` and returns stdout, stderr and its exit status.
func runEval(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	return runEvalEnv(t, nil, args...)
}

// runEvalEnv is runEval with extra environment variables.
func runEvalEnv(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(pyboxBin, append([]string{"eval"}, args...)...)
	cmd.Env = append(evalEnv(t), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("run pybox eval: %v", err)
	}
	return out.String(), errb.String(), cmd.ProcessState.ExitCode()
}

// readEvalResults reads a results file; every line must be a whole result.
func readEvalResults(t *testing.T, path string) []evalResult {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 0 && b[len(b)-1] != '\n' {
		t.Errorf("the results file does not end with a whole line: ...%q", b[max(0, len(b)-80):])
	}
	var out []evalResult
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		var r evalResult
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("results line %d is not a result: %v: %.200s", len(out)+1, err, sc.Text())
		}
		out = append(out, r)
	}
	return out
}

// TestEvalRequirements: samples that ask for requirements run in a layer
// installed once for the batch (and reused by the next batch: cached);
// requirements that cannot be installed are those samples' verdict, and
// the rest of the batch runs.
func TestEvalRequirements(t *testing.T) {
	layerTest(t)
	wh := testenv.Wheelhouse(t)
	dropTestLayers(t)
	dir := t.TempDir()
	in := filepath.Join(dir, "samples.jsonl")
	os.WriteFile(in, []byte(strings.Join([]string{
		`{"id": "a", "code": "import pyboxdemo\nprint(pyboxdemo.answer())", "requirements": ["pyboxdemo"]}`,
		`{"id": "b", "code": "import pyboxdemo", "test": "assert pyboxdemo.answer() == 42", "requirements": ["PyBoxDemo"]}`,
		`{"id": "plain", "code": "import pyboxdemo"}`,
		`{"id": "missing", "code": "print(1)", "requirements": ["pyboxnosuchpackage"]}`,
	}, "\n")), 0o644)
	state := t.TempDir()
	evalWith := func(out string) (string, int) {
		cmd := exec.Command(pyboxBin, "eval", "-o", out, in)
		cmd.Env = append(evalEnv(t), "PYBOX_WHEELHOUSE="+wh, "PYBOX_INSTALL_NETWORK=none", "PYBOX_STATE_DIR="+state)
		var errb bytes.Buffer
		cmd.Stderr = &errb
		err := cmd.Run()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		return errb.String(), cmd.ProcessState.ExitCode()
	}
	out := filepath.Join(dir, "results.jsonl")
	stderr, code := evalWith(out)
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if n := strings.Count(stderr, "installing pyboxdemo"); n != 1 {
		t.Errorf("pyboxdemo installed %d times for the batch; want once:\n%s", n, stderr)
	}
	rs := readEvalResults(t, out)
	if len(rs) != 4 {
		t.Fatalf("%d results", len(rs))
	}
	if !rs[0].Passed || rs[0].Stdout != "42\n" || !rs[1].Passed {
		t.Errorf("samples with the requirement: %+v %+v", rs[0], rs[1])
	}
	if rs[2].Passed || rs[2].Exception != "ModuleNotFoundError" {
		t.Errorf("the sample without it must not see the layer: %+v", rs[2])
	}
	if rs[3].Passed || rs[3].Error != evalRequirements || !strings.Contains(rs[3].Message, "pyboxnosuchpackage") {
		t.Errorf("uninstallable requirements: %+v", rs[3])
	}
	// The next batch finds the layer made.
	start := time.Now()
	stderr, code = evalWith(filepath.Join(dir, "again.jsonl"))
	if code != 0 || !readEvalResults(t, filepath.Join(dir, "again.jsonl"))[0].Passed {
		t.Fatalf("second batch: exit %d\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "pyboxdemo: a cached layer") {
		t.Errorf("the second batch did not reuse the layer:\n%s", stderr)
	}
	t.Logf("the second batch took %v", time.Since(start).Round(time.Millisecond))
}

// TestEvalDaemonLost: the Docker daemon goes away mid-batch and stays
// away: the batch stops with exit 125 after one retry, the results file
// holds whole results only (no sample got a verdict it did not earn), and
// once the daemon is back the same command completes the batch with
// nothing left behind.
func TestEvalDaemonLost(t *testing.T) {
	parallelTest(t)
	eng := testenv.Docker(t)
	testenv.RuntimeImage(t, eng, "base")
	px := testenv.NewDaemonProxy(t)
	dir := t.TempDir()
	in := filepath.Join(dir, "samples.jsonl")
	var lines []string
	for i := range 30 {
		lines = append(lines, fmt.Sprintf(`{"id": %d, "code": "import time\ntime.sleep(0.2)\nprint(%d)"}`, i, i))
	}
	os.WriteFile(in, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
	out := filepath.Join(dir, "results.jsonl")
	state := t.TempDir()
	cmd, stderr := startEvalUntil(t, append(evalEnv(t), "DOCKER_HOST="+px.Host, "PYBOX_STATE_DIR="+state), out, 3, "-o", out, in)
	px.Stop()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(2 * time.Minute):
		cmd.Process.Kill()
		<-done
		t.Fatalf("the batch did not stop within 2 minutes of losing the daemon:\n%s", stderr.String())
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitFailure {
		t.Fatalf("after the daemon went away: %v; want exit %d\n%s", err, exitFailure, stderr.String())
	}
	if !strings.Contains(stderr.String(), "Docker") || !strings.Contains(stderr.String(), "run the same command again") {
		t.Errorf("the stopped batch does not explain itself:\n%s", stderr.String())
	}
	partial := readEvalResults(t, out)
	for i, r := range partial {
		if string(r.ID) != strconv.Itoa(i) || !r.Passed || r.Stdout != fmt.Sprintf("%d\n", i) {
			t.Errorf("result %d written before the stop is not the sample's own: %+v", i, r)
		}
	}
	px.Start()
	left := testenv.Managed(t, eng, map[string]string{"pybox.pid": strconv.Itoa(cmd.Process.Pid)})
	resume := exec.Command(pyboxBin, "eval", "-o", out, in)
	resume.Env = append(evalEnv(t), "PYBOX_STATE_DIR="+state)
	var errText bytes.Buffer
	resume.Stderr = &errText
	if err := resume.Run(); err != nil {
		t.Fatalf("resume with the daemon back: %v\n%s", err, errText.String())
	}
	if all := readEvalResults(t, out); len(all) != 30 {
		t.Errorf("%d results after the resume; want 30", len(all))
	}
	t.Logf("%d containers of the stopped batch were left while the daemon was away; the resume said: %s", len(left), lastLine(strings.SplitN(errText.String(), "\n", 2)[0]))
	if now := testenv.Managed(t, eng, map[string]string{"pybox.pid": strconv.Itoa(cmd.Process.Pid)}); len(now) > 0 {
		t.Errorf("the stopped batch's containers are still there after the next pybox eval on its state directory: %v", now)
	}
}

// startEvalUntil starts `pybox eval args...` with env and returns once
// out holds n results (failing the test after 2 minutes without them).
func startEvalUntil(t *testing.T, env []string, out string, n int, args ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(pyboxBin, append([]string{"eval"}, args...)...)
	cmd.Env = env
	stderr := &bytes.Buffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if b, _ := os.ReadFile(out); bytes.Count(b, []byte("\n")) >= n {
			return cmd, stderr
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("no %d results after 2 minutes:\n%s", n, stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
