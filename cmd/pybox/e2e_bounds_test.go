//go:build !windows

package main

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pybox-dev/pybox/internal/testenv"
)

// peakRSS is a process's peak resident memory in KiB (VmHWM).
func peakRSS(t *testing.T, pid int) int {
	t.Helper()
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kib, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			return kib
		}
	}
	t.Fatal("no VmHWM")
	return 0
}

// Sixty concurrent 1 MiB calls against one slot: the calls past the bound
// are refused at once, the server's memory stays bounded, and code is
// saved only for the calls that ran (the old server grew to 387 MB and
// left 60 MiB of refused code on disk).
func TestManyLargeCallsAreRefusedCheaply(t *testing.T) {
	s := startServer(t, "PYBOX_MAX_CONCURRENT=1", "PYBOX_QUEUE_WAIT=60s")
	// Hold the one slot while the flood arrives, until one of it is refused.
	hold := holding(t, s.cs, s.storage)
	big := "print('ran')\n#" + strings.Repeat("x", 1<<20-20)
	const n = 60
	var wg sync.WaitGroup
	var mu sync.Mutex
	ran, busy := 0, 0
	refused := make(chan struct{})
	var refusedOnce sync.Once
	for range n {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
			defer cancel()
			res, err := s.cs.CallTool(ctx, callParams("execute_code", map[string]any{"code": big}))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				t.Errorf("call: %v", err)
			case res.IsError && strings.Contains(text(res), "busy"):
				busy++
				refusedOnce.Do(func() { close(refused) })
			case !res.IsError && strings.Contains(text(res), "ran"):
				ran++
			default:
				t.Errorf("unexpected result: %.300s", text(res))
			}
		})
	}
	select {
	case <-refused:
	case <-time.After(3 * time.Minute):
		t.Error("no call of the flood was refused while the slot was held")
	}
	release(t, s.storage) // the calls waiting for the slot run
	wg.Wait()
	<-hold
	rss := peakRSS(t, s.cmd.Process.Pid)
	saved := 0
	entries, _ := os.ReadDir(s.storage)
	for _, e := range entries {
		if fi, err := os.Stat(filepath.Join(s.storage, e.Name())); err == nil && fi.Size() >= 1<<20-64 {
			saved++
		}
	}
	t.Logf("%d calls: %d ran, %d refused as busy; %d large files saved; server peak RSS %d MiB", n, ran, busy, saved, rss>>10)
	if busy == 0 || ran == 0 || ran+busy != n {
		t.Fatalf("ran %d, busy %d of %d: want some refused at once and the others run", ran, busy, n)
	}
	if saved != ran {
		t.Fatalf("%d programs saved but %d ran: a refused call left its code on disk", saved, ran)
	}
	if rss > 250<<10 {
		t.Fatalf("server peak RSS %d MiB; want it bounded (the old server reached 387 MB)", rss>>10)
	}
	// The server still serves.
	if out, res := s.exec(map[string]any{"code": "print(2)"}); out.Stdout != "2\n" {
		t.Fatalf("after the flood: %s", text(res))
	}
}

// A client that stops reading stdout does not hold the server or its
// containers: once a write has been blocked for the stall limit, every run
// stops, every container goes, and the server exits (the old server kept
// itself and 3 containers alive as long as the client lived).
func TestStalledClientDoesNotHoldContainers(t *testing.T) {
	parallelTest(t)
	eng := testenv.Docker(t)
	testenv.RuntimeImage(t, eng, "base")
	storage := t.TempDir()
	cmd := exec.Command(pyboxBin, "serve")
	cmd.Env = append(cmd.Environ(), "CODE_STORAGE_DIR="+storage, "PYBOX_STATE_DIR="+t.TempDir(), "PYBOX_BUILD=never", "PYBOX_STALL_TIMEOUT=3s")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe() // never read: the client has stalled
	var stderr testenv.LogBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	defer stdout.Close()
	defer stdin.Close()
	call := func(id int, args string) string {
		return `{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"tools/call","params":{"name":"execute_code","arguments":` + args + `}}` + "\n"
	}
	msgs := rawInit + `{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n" +
		call(10, `{"code":"print('x' * 900000)","session_id":"held"}`) + // a large answer nobody reads, and a session container
		call(11, `{"code":"import time\nopen('started-11', 'w').close()\ntime.sleep(100)","timeout_s":150}`) +
		call(12, `{"code":"import time\nopen('started-12', 'w').close()\ntime.sleep(100)","timeout_s":150}`)
	go io.WriteString(stdin, msgs)
	waitFile(t, filepath.Join(storage, "started-11"))
	waitFile(t, filepath.Join(storage, "started-12"))
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err == nil {
			t.Errorf("the server exited with status 0 after its client stalled; want a failure status")
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the server still runs 60s after its client stopped reading; its log:\n%s", stderr.String())
	}
	if left := testenv.Managed(t, eng, map[string]string{"pybox.pid": strconv.Itoa(cmd.Process.Pid)}); len(left) != 0 {
		t.Errorf("containers left after the client stalled: %v", left)
	}
	if !strings.Contains(stderr.String(), "stopped reading") {
		t.Errorf("the log does not say why the server stopped:\n%s", stderr.String())
	}
}

// What a sandbox makes the server log is bounded: a session writing 60 MiB
// to stderr adds nothing to the log (the old server logged 64 MiB), and a
// program provoking the same warning call after call is rate-limited.
func TestSandboxCannotFloodTheLog(t *testing.T) {
	parallelTest(t)
	s := startServer(t)
	flood := "import os, sys\nchunk = 'e' * (1 << 20)\nfor _ in range(30):\n    sys.stderr.write(chunk)\n    os.write(2, chunk.encode())\nprint('done')"
	out, res := s.exec(map[string]any{"code": flood, "session_id": "loud", "timeout_s": 120})
	if out.ExitCode != 0 || !out.Truncated {
		t.Fatalf("flood: %s", text(res))
	}
	if n := len(s.stderr.String()); n > 64<<10 {
		t.Fatalf("60 MiB on a session's stderr grew the server log to %d bytes", n)
	}
	// Each of these writes garbage into the runner's channel, which ends
	// its session with a warning.
	breaker := "import os\nfor fd in range(3, 64):\n    try: os.write(fd, b'x' * 4096)\n    except OSError: pass\nprint('broke')"
	start := time.Now()
	const calls = 30
	for range calls {
		s.exec(map[string]any{"code": breaker, "session_id": "breaker"})
	}
	logged := strings.Count(s.stderr.String(), "runner ended during a program")
	allowed := 20 + int(time.Since(start)/(3*time.Second)) + 1 // logcap's burst and rate
	t.Logf("%d calls that each provoke a warning in %v: %d logged; server log %d bytes", calls, time.Since(start).Round(time.Second), logged, len(s.stderr.String()))
	if logged == 0 || logged > allowed {
		t.Fatalf("%d warnings logged for %d calls; want between 1 and %d", logged, calls, allowed)
	}
}
