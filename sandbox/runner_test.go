package sandbox_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pybox-dev/pybox/sandbox"
)

// runnerCase is a program and what the plain interpreter does with it.
type runnerCase struct {
	name     string
	code     string
	stdin    *string
	exit     int
	stdout   string   // exact, when not ""
	stderr   []string // substrings
	noStderr []string // substrings that must not appear
}

func ptr(s string) *string { return &s }

// runnerCases hold in both modes: exit statuses as python FILE gives them
// (checked against Debian's python3.11), tracebacks without the runner.
var runnerCases = []runnerCase{
	{name: "KeyboardInterrupt", code: "raise KeyboardInterrupt", exit: 130, stderr: []string{"KeyboardInterrupt"}},
	{name: "exit huge", code: "import sys; sys.exit(2**100)", exit: 255},
	{name: "exit huge negative", code: "import sys; sys.exit(-2**100)", exit: 255},
	{name: "exit wide", code: "import sys; sys.exit(2**40 + 3)", exit: 3},
	{name: "exit -1", code: "import sys; sys.exit(-1)", exit: 255},
	{name: "exit 256", code: "import sys; sys.exit(256)", exit: 0},
	{name: "exit True", code: "import sys; sys.exit(True)", exit: 1},
	{name: "exit message", code: "import sys; sys.exit('bye')", exit: 1, stderr: []string{"bye"}},
	{name: "syntax error", code: "x = (", exit: 1, stderr: []string{"SyntaxError", "line 1"},
		noStderr: []string{"Traceback", "pybox-runner", "runpy"}},
	{name: "stdout closed", code: "import sys; print('a'); sys.stdout.close()", exit: 0, stdout: "a\n", noStderr: []string{"Traceback"}},
	{name: "stdout None", code: "import sys; sys.stdout = None", exit: 0, noStderr: []string{"Traceback"}},
	{name: "stderr closed then exit", code: "import sys; sys.stderr.close(); sys.exit(3)", exit: 3},
	{name: "name is main", code: "if __name__ == '__main__': print('main')", stdout: "main\n"},
	{name: "pickle own class", code: "import pickle\nclass A:\n    v = 5\nprint(pickle.loads(pickle.dumps(A())).v)", stdout: "5\n"},
	{name: "input with stdin", code: "print(input()[::-1])", stdin: ptr("olleh\nx\n"), stdout: "hello\n"},
	{name: "binary stdin", code: "import sys; print(sys.stdin.buffer.read())", stdin: ptr("ab"), stdout: "b'ab'\n"},
	{name: "no stdin", code: "input()", exit: 1, stderr: []string{"EOFError"}},
	{name: "not UTF-8", code: "import os; os.write(1, b'\\xff\\xfe')", stdout: "\xff\xfe"},
	{name: "long line", code: "import sys; sys.stdout.write('y' * 300000)", stdout: strings.Repeat("y", 300000)},
}

func (c runnerCase) check(t *testing.T, res sandbox.Result) {
	t.Helper()
	if res.ExitCode != c.exit {
		t.Errorf("exit status %d; want %d (stderr %q)", res.ExitCode, c.exit, res.Stderr)
	}
	if c.stdout != "" && res.Stdout != c.stdout {
		t.Errorf("stdout %.200q; want %.200q", res.Stdout, c.stdout)
	}
	for _, s := range c.stderr {
		if !strings.Contains(res.Stderr, s) {
			t.Errorf("stderr %q; want it to contain %q", res.Stderr, s)
		}
	}
	for _, s := range c.noStderr {
		if strings.Contains(res.Stderr, s) {
			t.Errorf("stderr %q contains %q", res.Stderr, s)
		}
	}
}

// TestRunnerRunMode: one-shot programs behave as under `python FILE`.
// They share one workspace (made before the sandbox, so it outlives the
// warm containers the pool keeps for it), a file each.
func TestRunnerRunMode(t *testing.T) {
	ws := workspace(t, "")
	sb, _ := newSandbox(t, sandbox.Config{MaxConcurrent: 2})
	cases := append(runnerCases, runnerCase{name: "thread outlives main",
		code: "import threading, time\nthreading.Thread(target=lambda: (time.sleep(0.3), print('late'))).start()", stdout: "late\n"},
		// The runner's own objects are frozen out of the collector (gc.freeze,
		// for a fast exit); the program's are collected as under python, during
		// the run and at interpreter exit, where a finalizer still prints.
		runnerCase{name: "the collector and exit finalizers work",
			code: "import gc\nclass C:\n    def __del__(self):\n        print('del at exit')\n" +
				"class Cyc:\n    pass\na = Cyc(); a.me = a; del a\nprint('collected', gc.collect() > 0)\nkeep = C(); keep.me = keep\n",
			stdout: "collected True\ndel at exit\n"})
	for i, c := range cases {
		file := fmt.Sprintf("case%d.py", i)
		writeFile(t, ws, file, c.code)
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			res, err := sb.Run(t.Context(), sandbox.Program{Workspace: ws, File: file, Stdin: c.stdin})
			if err != nil {
				t.Fatal(err)
			}
			c.check(t, res)
		})
	}
}

// TestRunnerSessionMode: the same programs in one session, which survives
// them all.
func TestRunnerSessionMode(t *testing.T) {
	sb, _ := newSandbox(t, sandbox.Config{})
	for _, c := range runnerCases {
		t.Run(c.name, func(t *testing.T) {
			res, err := sb.RunInSession(t.Context(), "edge", sandbox.SessionProgram{Code: c.code, Filename: "/workspace/cell.py", Stdin: c.stdin})
			if err != nil {
				t.Fatal(err)
			}
			if res.SessionLost {
				t.Fatalf("session lost: %+v", res)
			}
			c.check(t, res)
		})
	}
}

// TestSessionSurvivesStreamTampering: a program that replaces, closes or
// redirects the output streams does not silence the next calls, nor stall
// them, nor gets the kernel's markers in its files.
func TestSessionSurvivesStreamTampering(t *testing.T) {
	sb, _ := newSandbox(t, sandbox.Config{})
	for _, tamper := range []string{
		"import sys, os\nsys.stdout = open(os.devnull, 'w')\nsys.stderr = open(os.devnull, 'w')",
		"import sys\nsys.stdout.close()\nsys.stderr.close()",
		"import os\nos.close(1)\nos.close(2)",
		"import os\nfd = os.open('/tmp/captured', os.O_WRONLY | os.O_CREAT | os.O_TRUNC)\nos.dup2(fd, 1)\nos.dup2(fd, 2)",
	} {
		t.Run(strings.Split(tamper, "\n")[1], func(t *testing.T) {
			start := time.Now()
			if res := run(t, sb, "tamper", tamper); res.SessionLost {
				t.Fatalf("tampering call lost the session: %+v", res)
			}
			res := run(t, sb, "tamper", "import sys, os\nprint('out')\nprint('err', file=sys.stderr)\n"+
				"print(os.path.exists('/tmp/captured') and open('/tmp/captured', 'rb').read())")
			if !strings.HasPrefix(res.Stdout, "out\n") || res.Stderr != "err\n" || res.SessionLost {
				t.Errorf("next call: stdout %q stderr %q lost=%v; want its output back", res.Stdout, res.Stderr, res.SessionLost)
			}
			if strings.Contains(res.Stdout, "PYBOX") {
				t.Errorf("the kernel's markers went into the program's file: %q", res.Stdout)
			}
			if took := time.Since(start); took > 15*time.Second { // a stall waits out the call (30 s); 5 s was missed under load
				t.Errorf("two calls took %v; want no stall", took)
			}
		})
	}
}

// TestRunnerExitParity: a one-shot program's end looks as under `python
// FILE` to everything it can see, although the runner skips the
// interpreter's teardown: non-daemon threads finish, atexit handlers run
// (a SystemExit there is reported and ignored), a finalizer of an object
// the program's globals keep (in a cycle) runs, files it never closed are
// flushed to disk, all in python's order, and its status stands.
func TestRunnerExitParity(t *testing.T) {
	t.Parallel() // its sandbox, folders and servers are its own; the package ends with these, two at a time
	ws := workspace(t, "")
	if err := os.Chmod(ws, 0o777); err != nil { // the program writes there
		t.Fatal(err)
	}
	sb, _ := newSandbox(t, sandbox.Config{})
	code := `import atexit, sys, threading, time
f = open('/workspace/unclosed.txt', 'w')
f.write('kept')
g = open('/workspace/unclosed.bin', 'wb', buffering=1 << 20)
g.write(b'x' * 1000)
class Bye:
    def __del__(self):
        print('bye from __del__')
b = Bye(); b.me = b
atexit.register(lambda: print('atexit ran'))
atexit.register(lambda: sys.exit(9))
def late():
    time.sleep(0.3)
    print('thread done')
threading.Thread(target=late).start()
sys.exit(4)
`
	writeFile(t, ws, "parity.py", code)
	for i := range 3 { // cold, then from the warm pool
		if i > 0 {
			waitFor(t, 30*time.Second, "a warm container", func() bool { return sb.PoolReady() > 0 })
		}
		res, err := sb.Run(t.Context(), sandbox.Program{Workspace: ws, File: "parity.py"})
		if err != nil {
			t.Fatal(err)
		}
		warm := res.Warm
		if warm != (i > 0) {
			t.Errorf("run %d: warm %v", i, warm)
		}
		if res.ExitCode != 4 {
			t.Errorf("warm %v: exit %d; want the program's 4 (an atexit SystemExit does not change it)", warm, res.ExitCode)
		}
		if want := "thread done\natexit ran\nbye from __del__\n"; res.Stdout != want {
			t.Errorf("warm %v: stdout %q; want %q", warm, res.Stdout, want)
		}
		if !strings.Contains(res.Stderr, "SystemExit: 9") {
			t.Errorf("warm %v: stderr %q; want the atexit handler's SystemExit reported", warm, res.Stderr)
		}
		if b, _ := os.ReadFile(filepath.Join(ws, "unclosed.txt")); string(b) != "kept" {
			t.Errorf("warm %v: unclosed text file holds %q; want %q", warm, b, "kept")
		}
		if st, err := os.Stat(filepath.Join(ws, "unclosed.bin")); err != nil || st.Size() != 1000 {
			t.Errorf("warm %v: unclosed buffered file: %v %v; want 1000 bytes", warm, st, err)
		}
		os.Remove(filepath.Join(ws, "unclosed.txt"))
		os.Remove(filepath.Join(ws, "unclosed.bin"))
	}
	// A program that leaves a large heap alive after its globals are
	// cleared (over a million small objects, in a cycle) ends through the
	// interpreter's own exit (finding its files would take memory in
	// proportion to it): its unclosed file is kept too.
	big := "data = [[i] for i in range(1_500_000)]\ndata.append(data)\nf = open('/workspace/big.txt', 'w')\nf.write('big kept')\ndef touch():\n    return data\n"
	writeFile(t, ws, "big.py", big)
	res, err := sb.Run(t.Context(), sandbox.Program{Workspace: ws, File: "big.py"})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "big.txt")); res.ExitCode != 0 || string(b) != "big kept" {
		t.Errorf("large heap: exit %d stderr %q, unclosed file holds %q; want 0 and %q", res.ExitCode, res.Stderr, b, "big kept")
	}
}
