//go:build !windows

package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// notes records progress notifications with their arrival times.
type notes struct {
	mu   sync.Mutex
	msgs []string
	at   []time.Time
}

func (n *notes) handler(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.msgs = append(n.msgs, r.Params.Message)
	n.at = append(n.at, time.Now())
}

// TestProgressStreamsOutput: output of a running program arrives as
// progress notifications while it runs, in stateless runs and in sessions.
// The program prints its first tick, then runs on for 6 s more: the first
// notification must come at least 3 s before the call ends (the end of a
// call that only reported at the end would be within moments of it),
// however long the container took to start on a busy machine.
func TestProgressStreamsOutput(t *testing.T) {
	parallelTest(t)
	n := &notes{}
	s := startServerWith(t, &mcp.ClientOptions{ProgressNotificationHandler: n.handler})
	code := "import time\nfor i in range(6):\n    print('tick', i, flush=True)\n    time.sleep(4.5 if i == 0 else 0.3)\n"
	for _, session := range []string{"", "progress-session"} {
		t.Run("session="+session, func(t *testing.T) {
			n.mu.Lock()
			n.msgs, n.at = nil, nil
			n.mu.Unlock()
			args := map[string]any{"code": code}
			if session != "" {
				args["session_id"] = session
			}
			start := time.Now()
			res, err := s.cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "execute_code", Arguments: args,
				Meta: mcp.Meta{"progressToken": "tok-" + session}})
			end := time.Now()
			if err != nil || res.IsError {
				t.Fatalf("call: %v %s", err, text(res))
			}
			n.mu.Lock()
			defer n.mu.Unlock()
			all := strings.Join(n.msgs, "")
			if len(n.msgs) < 3 || !strings.Contains(all, "tick 0") || !strings.Contains(all, "tick 5") {
				t.Fatalf("got %d notifications %q; want several carrying the ticks", len(n.msgs), n.msgs)
			}
			if before := end.Sub(n.at[0]); before < 3*time.Second {
				t.Errorf("first notification at %v of a %v call, %v before its end; want it during the run (at least 3 s before the end), not at the end",
					n.at[0].Sub(start), end.Sub(start), before)
			}
		})
	}
}

// TestCancelKillsContainer: cancelling a call kills and removes its container.
func TestCancelKillsContainer(t *testing.T) {
	parallelTest(t)
	s := startServer(t)
	for _, session := range []string{"", "cancel-session"} {
		t.Run("session="+session, func(t *testing.T) {
			// The program names its container (hostname = ID prefix) in a file.
			code := "import socket\nopen('host.txt', 'w').write(socket.gethostname())\nwhile True: pass"
			args := map[string]any{"code": code, "timeout_s": 120}
			hostFile := filepath.Join(s.storage, "host.txt")
			if session != "" {
				args["session_id"] = session
				hostFile = filepath.Join(s.state, "sessions", session, "host.txt")
			}
			os.Remove(hostFile)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			errc := make(chan error, 1)
			go func() {
				_, err := s.cs.CallTool(ctx, &mcp.CallToolParams{Name: "execute_code", Arguments: args})
				errc <- err
			}()
			host := waitForFile(t, hostFile)
			cancel()
			if err := <-errc; err == nil {
				t.Fatal("the cancelled call returned a result")
			}
			// Removed by the cancel, not by its 120 s deadline: well before
			// that, with room for a loaded daemon (it was 2 s).
			deadline := time.Now().Add(60 * time.Second)
			for c := s.container(host); c != nil; c = s.container(host) {
				if time.Now().After(deadline) {
					t.Fatalf("container still present 60 s after the cancel (its deadline is 120 s): %v", c)
				}
				time.Sleep(50 * time.Millisecond)
			}
			if out, _ := s.exec(map[string]any{"code": "print('after cancel')"}); out.Stdout != "after cancel\n" {
				t.Errorf("server after cancel: %q", out.Stdout)
			}
		})
	}
}

// waitForFile waits (up to 30 s) for path to hold something and returns it.
func waitForFile(t *testing.T, path string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
			return string(b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared", path)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
