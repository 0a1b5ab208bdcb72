//go:build !windows

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pybox-dev/pybox/internal/engine"
	"github.com/pybox-dev/pybox/internal/testenv"
	"github.com/pybox-dev/pybox/tools"
)

// The Docker daemon goes away while a program runs (every connection cut,
// as a restart does) and comes back: the call ends with a clear error, the
// server goes on, the next call works, and no container is left behind,
// including those pybox could not remove while the daemon was away.
func TestDaemonRestartWhileRunning(t *testing.T) {
	parallelTest(t)
	testenv.RuntimeImage(t, testenv.Docker(t), "base")
	px := testenv.NewDaemonProxy(t)
	s := startServer(t, "DOCKER_HOST="+px.Host)
	if out, res := s.exec(map[string]any{"code": "print(1)"}); out.Stdout != "1\n" {
		t.Fatalf("before: %s", text(res))
	}
	got := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := s.cs.CallTool(t.Context(), callParams("execute_code", map[string]any{
			"code": "import time\nopen('started', 'w').close()\ntime.sleep(60)", "timeout_s": 90}))
		if err != nil {
			res = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "protocol error: " + err.Error()}}}
		}
		got <- res
	}()
	waitFile(t, filepath.Join(s.storage, "started"))
	px.Stop()
	// Away until the server has met it: the run's container could not be
	// removed (it still runs on the real daemon).
	if log, ok := s.stderr.Await("container not removed"); !ok {
		t.Fatalf("the server did not try to remove the interrupted run's container while the daemon was away:\n%s", log)
	}
	px.Start()
	select {
	case res := <-got:
		t.Logf("the call in flight ended with: %.300s", text(res))
		if !res.IsError || !strings.Contains(text(res), "Docker") {
			t.Errorf("the call in flight when the daemon went away: %s; want a clear error naming Docker", text(res))
		}
	case <-time.After(45 * time.Second):
		t.Fatal("the call in flight hung after the daemon came back")
	}
	deadline := time.Now().Add(30 * time.Second)
	var out2 string
	ok := false
	for !ok && time.Now().Before(deadline) {
		res := s.call("execute_code", map[string]any{"code": "print(2)"})
		out2 = text(res)
		if ok = !res.IsError && strings.Contains(out2, "--- stdout ---\n2\n"); !ok {
			time.Sleep(time.Second)
		}
	}
	if !ok {
		t.Fatalf("no call worked after the daemon came back: %s", out2)
	}
	// The container of the interrupted run goes too (the server removes it
	// once the daemon answers again), not only the pool's at close.
	deadline = time.Now().Add(30 * time.Second)
	for {
		stray := 0
		for _, c := range s.containers() {
			if c.Labels["pybox.role"] != "pool" {
				stray++
			}
		}
		if stray == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("containers left after the daemon came back: %v", s.containers())
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// The daemon is down when the server starts and comes up later: calls
// fail clearly meanwhile, and work once it is there.
func TestDaemonDownAtStart(t *testing.T) {
	parallelTest(t)
	testenv.RuntimeImage(t, testenv.Docker(t), "base")
	px := testenv.NewDaemonProxy(t)
	px.Stop()
	s := startServer(t, "DOCKER_HOST="+px.Host)
	if res := s.call("execute_code", map[string]any{"code": "print(1)"}); !res.IsError || !strings.Contains(text(res), "Docker is not reachable") {
		t.Fatalf("with the daemon down: %s", text(res))
	}
	px.Start()
	deadline := time.Now().Add(30 * time.Second)
	for {
		res := s.call("execute_code", map[string]any{"code": "print(1)"})
		if !res.IsError && strings.Contains(text(res), "1") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the daemon is back but calls still fail: %s", text(res))
		}
		time.Sleep(time.Second)
	}
}

// procStats reads a process's open files, OS threads and resident memory.
func procStats(t *testing.T, pid int) (fds, threads, rssKiB int) {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for line := range strings.SplitSeq(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) >= 2 && fields[0] == "Threads:" {
			threads, _ = strconv.Atoi(fields[1])
		}
		if len(fields) >= 2 && fields[0] == "VmRSS:" {
			rssKiB, _ = strconv.Atoi(fields[1])
		}
	}
	return len(ents), threads, rssKiB
}

// A soak of mixed calls (ok, error, timeout, out of memory, output flood,
// session, install cache hit): every call gets its expected result, the
// server's open files, threads and memory stay flat, and no container is
// left. PYBOX_SOAK_CALLS sets the length (CI: 210; the full run: 2000).
// Its package is its own (testenv.OwnPackage): it takes no layer-cache
// lock, which it held for minutes beside the other installing tests.
func TestSoakMixedCalls(t *testing.T) {
	parallelTest(t)
	calls := 210
	if n, err := strconv.Atoi(os.Getenv("PYBOX_SOAK_CALLS")); err == nil && n > 0 {
		calls = n
	}
	pkg, wh := testenv.OwnPackage(t, testenv.Docker(t))
	s := startServer(t, "PYBOX_WHEELHOUSE="+wh, "PYBOX_INSTALL_NETWORK=none", "PYBOX_MEMORY=128m", "PYBOX_OUTPUT_LIMIT=256k")
	if first := s.install(pkg); first.Image == "" {
		t.Fatalf("install: %+v", first)
	}
	kinds := []struct {
		name  string
		args  map[string]any
		check func(out tools.ExecutionOutput, res *mcp.CallToolResult) bool
	}{
		{"ok", map[string]any{"code": "print(6 * 7)"}, func(o tools.ExecutionOutput, _ *mcp.CallToolResult) bool { return o.Stdout == "42\n" }},
		{"error", map[string]any{"code": "raise ValueError('soak')"}, func(o tools.ExecutionOutput, _ *mcp.CallToolResult) bool {
			return o.ExitCode == 1 && strings.Contains(o.Stderr, "ValueError: soak")
		}},
		{"timeout", map[string]any{"code": "import time; time.sleep(30)", "timeout_s": 0.5}, func(o tools.ExecutionOutput, _ *mcp.CallToolResult) bool { return o.TimedOut }},
		{"oom", map[string]any{"code": "x = bytearray(600 << 20); x[::4096] = b'x' * len(x[::4096])"}, func(o tools.ExecutionOutput, _ *mcp.CallToolResult) bool { return o.OOMKilled }},
		{"flood", map[string]any{"code": "import sys\nfor _ in range(50): sys.stdout.write('y' * 100_000)"}, func(o tools.ExecutionOutput, _ *mcp.CallToolResult) bool { return o.Truncated }},
		{"session", map[string]any{"code": "n = globals().get('n', 0) + 1\nprint('ok')", "session_id": "soak"}, func(o tools.ExecutionOutput, _ *mcp.CallToolResult) bool { return o.Stdout == "ok\n" }},
		{"import", map[string]any{"code": "import " + pkg + "\nprint(" + pkg + ".answer())"}, func(o tools.ExecutionOutput, _ *mcp.CallToolResult) bool { return o.Stdout == "42\n" }},
	}
	pid := s.cmd.Process.Pid
	var base [3]int
	failures := 0
	start := time.Now()
	for i := range calls {
		if i == calls/5 { // after the warm-up: pool, session and caches in place
			base[0], base[1], base[2] = procStats(t, pid)
		}
		if i%len(kinds) == len(kinds)-1 && i/len(kinds)%5 == 0 {
			if c := s.install(pkg); !c.Cached { // an install cache hit now and then
				t.Errorf("call %d: a repeated install was not a cache hit: %+v", i, c)
			}
			continue
		}
		k := kinds[i%len(kinds)]
		out, res := s.exec(k.args)
		if !k.check(out, res) {
			if failures++; failures <= 5 {
				t.Errorf("call %d (%s): unexpected result: %.300s", i, k.name, text(res))
			}
		}
	}
	// The last calls' pool refills may still hold their attach streams
	// (on a loaded machine): wait for them, bounded, before the figures.
	waitSettled(t, pid, base[0], 8)
	fds, threads, rss := procStats(t, pid)
	t.Logf("%d calls in %v; server: open files %d -> %d, threads %d -> %d, RSS %d -> %d MiB",
		calls, time.Since(start).Round(time.Second), base[0], fds, base[1], threads, base[2]>>10, rss>>10)
	if fds > base[0]+8 || threads > base[1]+8 || rss > base[2]+40<<10 {
		t.Errorf("the server grew over the soak: open files %d -> %d, threads %d -> %d, RSS %d -> %d KiB", base[0], fds, base[1], threads, base[2], rss)
	}
	if rss > 150<<10 {
		t.Errorf("server RSS %d MiB under the soak; the target is at most 150 MiB", rss>>10)
	}
	for _, c := range s.containers() {
		if role := c.Labels["pybox.role"]; role != "pool" && role != "session" {
			t.Errorf("container left after the soak: %s %v", c.Name, c.Labels)
		}
	}
}

// The server is killed (SIGKILL) during an install: the next server on the
// same state directory removes the install's container, the environment
// still points at its last good image, and the install, tried again, works.
func TestKilledDuringInstall(t *testing.T) {
	layerTest(t)
	wh := testenv.Wheelhouse(t)
	state := t.TempDir()
	tmp := t.TempDir() // the system's temporary folder, as the killed server sees it
	a := packageServer(t, wh, "PYBOX_STATE_DIR="+state, "TMPDIR="+tmp)
	good := a.envConfig()
	startInstall(t, a, "pyboxdemo")
	a.kill()
	b := packageServer(t, wh, "PYBOX_STATE_DIR="+state) // it reaps before it answers
	if left := a.containers(); len(left) != 0 {
		t.Errorf("the killed server's containers are still there: %v", left)
	}
	// Nor the install's staging folder (its wheelhouse copy and downloads,
	// up to 2 GiB): the host's disk keeps nothing of a killed server.
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("the killed server's install left %s in its temporary folder", left[0].Name())
	}
	if left, _ := os.ReadDir(filepath.Join(state, "staging")); len(left) != 0 { // b stages nothing yet
		t.Errorf("the killed server's staging folder is still there: %s", left[0].Name())
	}
	if now := b.envConfig(); now.Image != good.Image || len(now.Requirements) != len(good.Requirements) {
		t.Errorf("after the kill the environment is %s %v; want its last good image %s %v", now.Image, now.Requirements, good.Image, good.Requirements)
	}
	if got := b.install("pyboxdemo"); got.Image == "" {
		t.Fatalf("the retried install: %+v", got)
	}
	if out, res := b.exec(map[string]any{"code": "import pyboxdemo\nprint(pyboxdemo.answer())"}); out.Stdout != "42\n" {
		t.Errorf("import after the retried install: %s", text(res))
	}
}

// SIGTERM during an install: the server exits within seconds with no
// container left (the install is the server's, owned and awaited: stopped,
// or finished), and the environment is consistent afterwards.
func TestTerminatedDuringInstall(t *testing.T) {
	// Serial: it bounds the server's exit after SIGTERM (30 s), which beside
	// the parallel tests at load 78 it missed.
	wh := testenv.Wheelhouse(t)
	state := t.TempDir()
	a := packageServer(t, wh, "PYBOX_STATE_DIR="+state)
	good := a.envConfig()
	startInstall(t, a, "pyboxdemo")
	pid := a.cmd.Process.Pid
	a.killed = true // its session ends with it
	start := time.Now()
	a.cmd.Process.Signal(syscall.SIGTERM)
	for !exited(pid) {
		if time.Since(start) > 30*time.Second {
			t.Fatalf("the server did not exit within 30 s of SIGTERM during an install")
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("exited %v after SIGTERM", time.Since(start).Round(time.Millisecond))
	if left := a.containers(); len(left) != 0 {
		t.Errorf("containers left by the server stopped during an install: %v", left)
	}
	// The environment is consistent: its last good image, or (when the
	// install had finished) the new layer with the package in it.
	b := packageServer(t, wh, "PYBOX_STATE_DIR="+state)
	now := b.envConfig()
	if now.Image != good.Image && !slices.ContainsFunc(now.Requirements, func(r string) bool { return strings.HasPrefix(r, "pyboxdemo") }) {
		t.Errorf("after SIGTERM the environment is %s %v: neither its last good image %s nor the finished install", now.Image, now.Requirements, good.Image)
	}
	if now.Image != good.Image {
		if out, res := b.exec(map[string]any{"code": "import pyboxdemo\nprint(pyboxdemo.answer())"}); out.Stdout != "42\n" {
			t.Errorf("the environment says the install finished, but: %s", text(res))
		}
	}
}

// startInstall starts installing pkg on s in the background and returns
// once its install container is there.
func startInstall(t *testing.T, s *server, pkg string) {
	t.Helper()
	go s.cs.CallTool(t.Context(), callParams("install_dependencies", map[string]any{"packages": []string{pkg}}))
	deadline := time.Now().Add(60 * time.Second)
	for !slices.ContainsFunc(s.containers(), func(c engine.Summary) bool { return c.Labels["pybox.role"] == "install" }) {
		if time.Now().After(deadline) {
			t.Fatal("the install container never appeared")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
