package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
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
	// Hold the one slot while the flood arrives.
	hold := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, _ := s.cs.CallTool(t.Context(), callParams("execute_code", map[string]any{"code": "import time; time.sleep(4)"}))
		hold <- res
	}()
	time.Sleep(500 * time.Millisecond)
	big := "print('ran')\n#" + strings.Repeat("x", 1<<20-20)
	const n = 60
	var wg sync.WaitGroup
	var mu sync.Mutex
	ran, busy := 0, 0
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
			case !res.IsError && strings.Contains(text(res), "ran"):
				ran++
			default:
				t.Errorf("unexpected result: %.300s", text(res))
			}
		})
	}
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
