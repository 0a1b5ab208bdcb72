package sandbox_test

import (
	"strings"
	"testing"
	"time"

	"github.com/pybox-dev/pybox/sandbox"
)

// TestScratchRuns: a program sent with its request and no host folder
// (pybox eval) runs from a warm container whose /workspace is its own
// tmpfs: what one run leaves there, or in /tmp, the next never sees; the
// tmpfs is bounded by the workspace quota; tests run in the program's
// globals after it, and a program cannot skip them by exiting with 0.
func TestScratchRuns(t *testing.T) {
	t.Parallel() // its sandbox, folders and servers are its own; the package ends with these, two at a time
	sb, eng := newSandbox(t, sandbox.Config{WarmPool: 2, Limits: sandbox.Limits{WorkspaceBytes: 8 << 20}})
	run := func(code string, test *string) sandbox.Result {
		t.Helper()
		res, err := sb.Run(t.Context(), sandbox.Program{File: "main.py", Source: &code, Test: test})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	leave := "import glob, os, socket\nprint(socket.gethostname())\nprint(sorted(glob.glob('/workspace/*') + glob.glob('/tmp/left-*')))\nopen('/workspace/left', 'w').write('x')\nopen('/tmp/left-x', 'w').write('x')\n"
	run(leave, nil) // cold; asks for the pool
	waitFor(t, 30*time.Second, "two warm containers", func() bool { return sb.PoolReady() == 2 })
	ready := map[string]bool{}
	for _, c := range poolContainers(t, eng, sb) {
		ready[c.ID[:12]] = true
	}
	for i := range 3 {
		res := run(leave, nil)
		lines := strings.Split(strings.TrimSpace(res.Stdout), "\n")
		if res.ExitCode != 0 || len(lines) != 2 || lines[1] != "['/workspace/main.py']" {
			t.Fatalf("run %d: exit %d stdout %q stderr %q; want only its own main.py", i, res.ExitCode, res.Stdout, res.Stderr)
		}
		if i == 0 && !ready[lines[0]] {
			t.Errorf("the first run after the fill did not take a warm container (%s; ready %v)", lines[0], ready)
		}
	}
	if res := run("open('/workspace/big', 'wb').write(b'x' * (16 << 20))\n", nil); res.ExitCode != 1 || !strings.Contains(res.Stderr, "No space left on device") {
		t.Errorf("16 MiB into an 8 MiB scratch workspace: exit %d stderr %q", res.ExitCode, res.Stderr)
	}
	test := "assert add(2, 3) == 5\n"
	if res := run("def add(a, b):\n    return a + b\n", &test); res.ExitCode != 0 {
		t.Errorf("passing tests: exit %d stderr %q", res.ExitCode, res.Stderr)
	}
	if res := run("def add(a, b):\n    return a - b\n", &test); res.ExitCode != 1 || !strings.Contains(res.Stderr, "AssertionError") {
		t.Errorf("failing tests: exit %d stderr %q", res.ExitCode, res.Stderr)
	}
	if res := run("import sys\nsys.exit(0)\n", &test); res.ExitCode == 0 || !strings.Contains(res.Stderr, "before its tests ran") {
		t.Errorf("exit(0) before the tests: exit %d stderr %q", res.ExitCode, res.Stderr)
	}
	if res := run("import atexit, os\natexit.register(lambda: os._exit(0))\n", &test); res.ExitCode != 1 {
		t.Errorf("an atexit os._exit(0) after failing tests: exit %d stderr %q; want 1", res.ExitCode, res.Stderr)
	}
	// A program cannot end its process with status 0 before its tests
	// have finished, however it ends it: the pass needs the runner's own
	// word that the tests ran to their end.
	for name, code := range map[string]string{
		"os._exit(0)":       "import os\nos._exit(0)\n",
		"exec of /bin/true": "import os\nos.execv('/bin/true', ['true'])\n",
		"sys.exit(0) in a function the tests call": "import sys\ndef add(a, b):\n    sys.exit(0)\n",
		"a thread's os._exit(0) mid-tests":         "import os, threading, time\nthreading.Timer(0.3, lambda: os._exit(0)).start()\ndef add(a, b):\n    time.sleep(2)\n    return a - b\n",
	} {
		if res := run(code, &test); res.ExitCode == 0 || !strings.Contains(res.Stderr, "before its tests finished") {
			t.Errorf("%s before the tests finished: exit %d stderr %q; want a failure that says the tests did not finish", name, res.ExitCode, res.Stderr)
		}
	}
	bad := "assert (\n"
	if res := run("x = 1\n", &bad); res.ExitCode != 1 || !strings.Contains(res.Stderr, "SyntaxError") {
		t.Errorf("tests that do not compile: exit %d stderr %q", res.ExitCode, res.Stderr)
	}
}
