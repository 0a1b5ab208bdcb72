//go:build !windows

package main

import (
	"strings"
	"testing"
	"time"

	"github.com/pybox-dev/pybox/tools"
)

// sessionRun runs code in session id.
func (s *server) sessionRun(id, code string, extra ...any) tools.ExecutionOutput {
	s.t.Helper()
	args := map[string]any{"code": code, "session_id": id}
	for i := 0; i+1 < len(extra); i += 2 {
		args[extra[i].(string)] = extra[i+1]
	}
	out, _ := s.exec(args)
	return out
}

func (s *server) sessions() tools.ListSessionsOutput {
	s.t.Helper()
	return decode[tools.ListSessionsOutput](s.t, s.call("list_sessions", map[string]any{}))
}

// TestSessionVariablesPersist: globals survive between calls in one session
// and never leak into another session or a stateless run.
func TestSessionVariablesPersist(t *testing.T) {
	parallelTest(t)
	eachRuntime(t, testSessionVariablesPersist)
}

func testSessionVariablesPersist(t *testing.T) {
	s := startServer(t)
	first := s.sessionRun("alpha", "x = 41\nimport math\nprint('set')")
	if first.Stdout != "set\n" || !first.NewSession || first.SessionID != "alpha" {
		t.Fatalf("first call: %+v", first)
	}
	if got := s.sessionRun("alpha", "print(x + 1, math.pi > 3)"); got.Stdout != "42 True\n" || got.NewSession {
		t.Errorf("second call in alpha: stdout %q stderr %q new=%v; want 42 True in the same session", got.Stdout, got.Stderr, got.NewSession)
	}
	if got := s.sessionRun("beta", "print(x)"); got.ExitCode != 1 || !strings.Contains(got.Stderr, "NameError") {
		t.Errorf("beta sees alpha's variable: exit %d stdout %q stderr %q", got.ExitCode, got.Stdout, got.Stderr)
	}
	if got, _ := s.exec(map[string]any{"code": "print(x)"}); !strings.Contains(got.Stderr, "NameError") {
		t.Errorf("a stateless run sees a session variable: %q %q", got.Stdout, got.Stderr)
	}
	// Files: each session has its own folder.
	s.sessionRun("alpha", "open('secret.txt', 'w').write('alpha only')")
	if got := s.sessionRun("beta", "import os\nprint(os.path.exists('secret.txt'), sorted(os.listdir('/workspace'))[:0])"); got.Stdout != "False []\n" {
		t.Errorf("beta sees alpha's files: %q %q", got.Stdout, got.Stderr)
	}
	// Errors, stdin and exit codes work inside a session and keep it alive.
	if got := s.sessionRun("alpha", "y = int(input())\nraise SystemExit(y)", "input", "5\n"); got.ExitCode != 5 || got.SessionLost {
		t.Errorf("SystemExit in a session: %+v", got)
	}
	if got := s.sessionRun("alpha", "print(x, y)"); got.Stdout != "41 5\n" {
		t.Errorf("after SystemExit the session should keep its state: %q %q", got.Stdout, got.Stderr)
	}
	list := s.sessions()
	if len(list.Sessions) != 2 || list.Sessions[0].SessionID != "alpha" || list.Sessions[0].Image == "" {
		t.Errorf("list_sessions: %+v", list)
	}
}

// TestSessionTimeoutAndOOMRecover: a timeout or an OOM kills the session's
// container, the result says the state is lost, and the next call works in
// a clean session.
func TestSessionTimeoutAndOOMRecover(t *testing.T) {
	parallelTest(t)
	eachRuntime(t, testSessionTimeoutAndOOMRecover)
}

func testSessionTimeoutAndOOMRecover(t *testing.T) {
	s := startServer(t, "PYBOX_MEMORY=128m")
	tests := []struct {
		name string
		code string
		args []any
		want func(tools.ExecutionOutput) bool
	}{
		{"timeout", "while True: pass", []any{"timeout_s", 1}, func(o tools.ExecutionOutput) bool { return o.TimedOut }},
		{"oom", "x = []\nwhile True: x.append(bytearray(16 << 20))", nil, func(o tools.ExecutionOutput) bool { return o.OOMKilled }},
		{"os._exit", "import os\nos._exit(3)", nil, func(o tools.ExecutionOutput) bool { return o.ExitCode == 3 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := "s-" + strings.ReplaceAll(tt.name, ".", "")
			s.sessionRun(id, "state = 'kept'")
			bad := s.sessionRun(id, tt.code, tt.args...)
			if !bad.SessionLost || !tt.want(bad) {
				t.Fatalf("failing call: %+v; want session_lost and the failure flagged", bad)
			}
			if left := s.containers(); len(left) != 0 && !strings.Contains(left[0].Name, "session") {
				t.Errorf("containers after a lost session: %v", left)
			}
			next := s.sessionRun(id, "print(globals().get('state', 'clean'))")
			if next.Stdout != "clean\n" || !next.NewSession {
				t.Errorf("next call: stdout %q new=%v; want a clean new session", next.Stdout, next.NewSession)
			}
			res := s.call("execute_code", map[string]any{"code": "print(1)", "session_id": id})
			if strings.Contains(text(res), "state was lost") {
				t.Errorf("the note about lost state repeats on later calls: %s", text(res))
			}
		})
	}
}

// TestSessionLimitsAndClose: the cap on live sessions is a clear error,
// close_session frees a place, and bad ids are refused.
func TestSessionLimitsAndClose(t *testing.T) {
	parallelTest(t)
	eachRuntime(t, testSessionLimitsAndClose)
}

func testSessionLimitsAndClose(t *testing.T) {
	s := startServer(t, "PYBOX_MAX_SESSIONS=2")
	s.sessionRun("one", "a = 1")
	s.sessionRun("two", "b = 2")
	res := s.call("execute_code", map[string]any{"code": "print(3)", "session_id": "three"})
	if !res.IsError || !strings.Contains(text(res), "too many live sessions") {
		t.Fatalf("third session: isError=%v %q; want the session cap error", res.IsError, text(res))
	}
	if res := s.call("close_session", map[string]any{"session_id": "one"}); res.IsError {
		t.Fatalf("close_session: %s", text(res))
	}
	if got := s.sessionRun("three", "print(3)"); got.Stdout != "3\n" {
		t.Errorf("after closing one, a new session fails: %+v", got)
	}
	if res := s.call("close_session", map[string]any{"session_id": "one"}); !res.IsError || !strings.Contains(text(res), "no such session") {
		t.Errorf("closing a closed session: %q", text(res))
	}
	for _, bad := range []string{"../x", "a b", strings.Repeat("x", 65), "é"} {
		res := s.call("execute_code", map[string]any{"code": "print(1)", "session_id": bad})
		if !res.IsError || !strings.Contains(text(res), "session_id") {
			t.Errorf("session_id %q: isError=%v %q", bad, res.IsError, text(res))
		}
	}
}

// TestSessionIdleExpiry: an idle session ends after the TTL and its
// container goes; the next call says the state was lost.
func TestSessionIdleExpiry(t *testing.T) {
	parallelTest(t)
	eachRuntime(t, testSessionIdleExpiry)
}

func testSessionIdleExpiry(t *testing.T) {
	s := startServer(t, "PYBOX_SESSION_TTL=1s")
	s.sessionRun("idle", "v = 1")
	deadline := time.Now().Add(20 * time.Second)
	for len(s.sessions().Sessions) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("session still live 20s after a 1s TTL")
		}
		time.Sleep(200 * time.Millisecond)
	}
	// It leaves the list first, then its container is removed.
	for left := s.containers(); len(left) != 0; left = s.containers() {
		if time.Now().After(deadline) {
			t.Fatalf("expired session's container is still there: %v", left)
		}
		time.Sleep(100 * time.Millisecond)
	}
	res := s.call("execute_code", map[string]any{"code": "print(globals().get('v', 'gone'))", "session_id": "idle"})
	if !strings.Contains(text(res), "gone") || !strings.Contains(text(res), "idle") {
		t.Errorf("call after expiry: %q; want a clean session and a note that it expired", text(res))
	}
}

// TestSessionKeepsProgramDescriptors: files a session program opened stay
// open for its next programs (the runner must not close descriptors that
// once were its own and now are the program's).
func TestSessionKeepsProgramDescriptors(t *testing.T) {
	parallelTest(t)
	s := startServer(t)
	if out := s.sessionRun("fds", "import os\nfds = [os.open('/tmp/keep-%d' % i, os.O_CREAT | os.O_WRONLY) for i in range(40)]\nprint(fds)"); out.ExitCode != 0 {
		t.Fatalf("opening files: %+v", out)
	}
	for i := range 2 {
		out := s.sessionRun("fds", "bad = []\nfor fd in fds:\n    try:\n        os.fstat(fd)\n    except OSError:\n        bad.append(fd)\nprint('closed under us:', bad)")
		if out.Stdout != "closed under us: []\n" {
			t.Errorf("program %d of the session: %+v", i+2, out)
		}
	}
}
