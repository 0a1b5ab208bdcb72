package sandbox_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pybox-dev/pybox/internal/engine"
	"github.com/pybox-dev/pybox/sandbox"
)

// poolContainers lists sb's idle warm containers.
func poolContainers(t *testing.T, eng *engine.Client, sb *sandbox.Sandbox) []engine.Summary {
	t.Helper()
	var out []engine.Summary
	for _, c := range owned(t, eng, sb) {
		if c.Labels[sandbox.LabelRole] == "pool" {
			out = append(out, c)
		}
	}
	return out
}

// writeFile adds a file to a workspace made by workspace().
func writeFile(t *testing.T, dir, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestWarmPoolRuns: after a first (cold) run the pool fills, the next runs
// take ready containers, and they behave exactly like cold runs: output,
// exit status, stdin or its absence, outputs folder, timeout.
func TestWarmPoolRuns(t *testing.T) {
	t.Parallel() // its sandbox, folders and servers are its own; the package ends with these, two at a time
	sb, eng := newSandbox(t, sandbox.Config{WarmPool: 2})
	ws := workspace(t, "import os, socket, sys\nprint(socket.gethostname())\nprint('err', file=sys.stderr)\nsys.exit(3)")
	writeFile(t, ws, "echo.py", "print(input().upper())\n")
	writeFile(t, ws, "eof.py", "try:\n    input()\nexcept EOFError:\n    print('eof')\n")
	writeFile(t, ws, "out.py", "import os\nd = os.environ['PYBOX_OUTPUTS']\nopen(d + '/made.txt', 'w').write('x')\nprint(d)\n")
	writeFile(t, ws, "spin.py", "import socket\nprint(socket.gethostname(), flush=True)\nwhile True: pass\n")
	run := func(p sandbox.Program) sandbox.Result {
		t.Helper()
		p.Workspace = ws
		res, err := sb.Run(t.Context(), p)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	run(sandbox.Program{File: "main.py"}) // cold; asks for the pool
	waitFor(t, 30*time.Second, "two warm containers", func() bool { return sb.PoolReady() == 2 && len(poolContainers(t, eng, sb)) == 2 })
	ready := map[string]bool{}
	for _, c := range poolContainers(t, eng, sb) {
		ready[c.ID[:12]] = true
	}
	res := run(sandbox.Program{File: "main.py"})
	host := strings.TrimSpace(res.Stdout)
	if !ready[host] || res.ExitCode != 3 || res.Stderr != "err\n" {
		t.Fatalf("warm run: host %q (ready: %v) exit %d stderr %q; want a pool container, exit 3, stderr err", host, ready, res.ExitCode, res.Stderr)
	}
	in := "shout\n"
	if res := run(sandbox.Program{File: "echo.py", Stdin: &in}); res.Stdout != "SHOUT\n" {
		t.Errorf("stdin: %q %q", res.Stdout, res.Stderr)
	}
	if res := run(sandbox.Program{File: "eof.py"}); res.Stdout != "eof\n" {
		t.Errorf("no stdin: %q %q", res.Stdout, res.Stderr)
	}
	res = run(sandbox.Program{File: "out.py"})
	if res.Outputs == nil || res.Stdout != res.Outputs.Path()+"\n" {
		t.Errorf("outputs: %q, %+v", res.Stdout, res.Outputs)
	} else if b, err := os.ReadFile(filepath.Join(res.Outputs.Dir, "made.txt")); err != nil || string(b) != "x" {
		t.Errorf("the run's file is not in its private output folder: %q, %v", b, err)
	} else if _, err := os.Stat(filepath.Join(ws, "outputs", res.Outputs.Name, "made.txt")); err == nil {
		t.Errorf("the run's file went to the shared workspace, not its private folder")
	}
	res.Outputs.Remove()
	// Five runs in a row are demand: the pool refills to at least its floor.
	waitFor(t, 30*time.Second, "the pool refilled", func() bool { return len(poolContainers(t, eng, sb)) >= 2 })
	res = run(sandbox.Program{File: "spin.py", Timeout: 3 * time.Second}) // room for spin.py to print its host first on a loaded machine (1 s: seen empty)
	host = strings.TrimSpace(res.Stdout)
	if !res.TimedOut || res.ExitCode != 137 || len(host) != 12 {
		t.Fatalf("timeout: %+v", res)
	}
	for _, c := range owned(t, eng, sb) {
		if strings.HasPrefix(c.ID, host) {
			t.Errorf("the timed-out warm container %s is still there", host)
		}
	}
}

// TestWarmPoolFollowsTheEnvironment: only recent environments stay warm,
// and Close removes every warm container (checked by newSandbox).
func TestWarmPoolFollowsTheEnvironment(t *testing.T) {
	sb, eng := newSandbox(t, sandbox.Config{WarmPool: 1})
	for range 3 {
		ws := workspace(t, "print(1)")
		if res, err := sb.Run(context.Background(), sandbox.Program{Workspace: ws, File: "main.py"}); err != nil || res.Stdout != "1\n" {
			t.Fatalf("run: %v %+v", err, res)
		}
	}
	// Three workspaces are three keys; only the two most recent stay warm.
	waitFor(t, 30*time.Second, "two warm keys, one container each", func() bool { return len(poolContainers(t, eng, sb)) == 2 })
	time.Sleep(500 * time.Millisecond) // a late fill for the dropped key must not linger either
	if n := len(poolContainers(t, eng, sb)); n != 2 {
		t.Errorf("%d warm containers for 2 recent keys of size 1", n)
	}
}

// TestWarmPoolDisabled: a negative size keeps no container ready.
func TestWarmPoolDisabled(t *testing.T) {
	sb, eng := newSandbox(t, sandbox.Config{WarmPool: -1})
	ws := workspace(t, "print(1)")
	for range 2 {
		if _, err := sb.Run(context.Background(), sandbox.Program{Workspace: ws, File: "main.py"}); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(poolContainers(t, eng, sb)); n != 0 {
		t.Errorf("%d warm containers with the pool disabled", n)
	}
}

// TestCloseEndsRunsInFlight: Close stops the runs in flight (as a
// cancellation would) and waits for them, so none of the Sandbox's
// containers outlives it (a process that exits after Close leaves
// nothing, not even a container created but never started), promptly
// however long the run would have taken; later runs are refused.
func TestCloseEndsRunsInFlight(t *testing.T) {
	sb, eng := newSandbox(t, sandbox.Config{WarmPool: -1})
	ws := workspace(t, "import time\nopen('/workspace/started', 'w').close()\ntime.sleep(120)\nprint('done')")
	if err := os.Chmod(ws, 0o777); err != nil {
		t.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() {
		_, err := sb.Run(context.Background(), sandbox.Program{Workspace: ws, File: "main.py", Timeout: 150 * time.Second})
		ran <- err
	}()
	waitFor(t, 30*time.Second, "the run started", func() bool { _, err := os.Stat(filepath.Join(ws, "started")); return err == nil })
	start := time.Now()
	sb.Close()
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("Close took %v with a run in flight; want it stopped at once", took)
	}
	if left := owned(t, eng, sb); len(left) != 0 {
		t.Errorf("containers after Close returned: %v", left)
	}
	if err := <-ran; !errors.Is(err, sandbox.ErrShutdown) {
		t.Errorf("the run in flight ended with %v; want ErrShutdown", err)
	}
	if _, err := sb.Run(context.Background(), sandbox.Program{Workspace: ws, File: "main.py"}); err == nil {
		t.Error("a run after Close was accepted")
	}
}
