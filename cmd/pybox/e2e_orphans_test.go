//go:build !windows

package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestServeKilledLeavesNoSandbox: a server killed with SIGKILL (a crash,
// an OOM kill of pybox, a desktop client that kills its servers) leaves
// none of its sandboxes behind, running or stopped, and no other server
// has to start to clean up: its session's kernel, its warm-pool
// containers and a run in the middle of its program all end and are
// removed within seconds, because each runner ends when its attach
// stream closes and the daemon removes what exited. Under each runtime.
func TestServeKilledLeavesNoSandbox(t *testing.T) {
	eachRuntime(t, func(t *testing.T) {
		s := startServer(t)
		if out := s.sessionRun("doomed", "x = 1"); out.ExitCode != 0 {
			t.Fatalf("session: exit %d stderr %q", out.ExitCode, out.Stderr)
		}
		if out, _ := s.exec(map[string]any{"code": "print(1)"}); out.ExitCode != 0 { // a stateless run asks for the pool
			t.Fatalf("run: exit %d stderr %q", out.ExitCode, out.Stderr)
		}
		waitUntil(t, time.Minute, "the warm pool to fill", func() bool { return pooled(s) >= 2 })
		// A run in the middle of its program: it would sleep for 10 minutes.
		calling := make(chan struct{})
		go func() {
			defer close(calling)
			code := "open('started', 'w').close()\nimport time\ntime.sleep(600)\n"
			_, _ = s.cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "execute_code", Arguments: map[string]any{"code": code}}) // fails once the server is killed
		}()
		waitUntil(t, time.Minute, "the run to start", func() bool {
			_, err := os.Stat(filepath.Join(s.storage, "started"))
			return err == nil
		})
		// The session's, the run's and at least one pooled container run.
		// The pool refills after runs end, to a target that follows recent
		// demand, so how many it holds now depends on timing; a fill may
		// even be between creating and starting a container when the
		// server dies: that one stays, created and never run (it holds no
		// process), until a server on the same state directory or pybox
		// gc reaps it. What must not stay is anything running.
		waitUntil(t, time.Minute, "the session, the run and a pooled container to run", func() bool { return running(s) >= 3 && pooled(s) >= 2 })
		before := running(s)
		s.kill()
		<-calling
		start := time.Now()
		waitUntil(t, 30*time.Second, "the killed server's containers to go", func() bool { return neverStarted(s) == len(s.containers()) })
		took := time.Since(start)
		left := s.containers()
		t.Logf("%d running containers (session, pool, run) gone %v after the server was killed; %d never started left", before, took.Round(time.Millisecond), len(left))
		if before < 3 {
			t.Errorf("%d containers running before the kill; want the session's, a pooled one and the run's", before)
		}
		if took > 15*time.Second {
			t.Errorf("the containers took %v to stop; want a few seconds", took)
		}
		for _, c := range left { // the reaper's work, done here
			if err := s.eng.Remove(context.Background(), c.ID); err != nil {
				t.Errorf("removing a never-started container: %v", err)
			}
		}
	})
}

// neverStarted counts the server's containers that were created and never started.
func neverStarted(s *server) int {
	n := 0
	for _, c := range s.containers() {
		if c.State == "created" {
			n++
		}
	}
	return n
}

// running counts the server's running containers.
func running(s *server) int {
	n := 0
	for _, c := range s.containers() {
		if c.State == "running" {
			n++
		}
	}
	return n
}

// waitUntil polls cond every 50 ms until it holds, failing the test after d.
func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: not within %v", what, d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
