package sandbox_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pybox-dev/pybox/sandbox"
)

// controlFD finds, from user code, the one descriptor of the runner's it
// can reach: its worker's control pipe (the protocol stream itself belongs
// to PID 1 and is out of reach).
const controlFD = "import gc, os\nfd = next(o for o in gc.get_objects() if type(o).__name__ == 'Kernel').ctl\n"

// TestSessionOutputOfLingeringThreads: a thread that prints after its
// program ended (while no call is running) does not break the session; its
// output shows up in the next call.
func TestSessionOutputOfLingeringThreads(t *testing.T) {
	sb, _ := newSandbox(t, sandbox.Config{})
	ws := workspace(t, "")
	if err := os.Chmod(ws, 0o777); err != nil {
		t.Fatal(err)
	}
	res, err := sb.RunInSession(t.Context(), "threads", sandbox.SessionProgram{Workspace: ws, Code: "import threading, time\n" +
		"def late():\n    time.sleep(0.3)\n    print('late', flush=True)\n    open('/workspace/printed', 'w').close()\n" +
		"threading.Thread(target=late).start()"})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("first call: %+v %v", res, err)
	}
	waitFor(t, 20*time.Second, "the thread's print", func() bool {
		_, err := os.Stat(filepath.Join(ws, "printed"))
		return err == nil
	})
	second := run(t, sb, "threads", "print('second')")
	if second.ExitCode != 0 || second.SessionLost || second.Stdout != "late\nsecond\n" {
		t.Fatalf("call after a thread printed: exit %d lost=%v stdout %q stderr %q; want the late line, then its own",
			second.ExitCode, second.SessionLost, second.Stdout, second.Stderr)
	}
	if third := run(t, sb, "threads", "print('third')"); third.Stdout != "third\n" || third.NewSession {
		t.Errorf("third call: stdout %q new=%v; want only its own output in the same session", third.Stdout, third.NewSession)
	}
}

// TestSessionCloseWhileThreadFloods: closing a session whose thread floods
// output while no call collects it returns promptly and removes the container.
func TestSessionCloseWhileThreadFloods(t *testing.T) {
	sb, eng := newSandbox(t, sandbox.Config{})
	run(t, sb, "flood", "import os, threading\n"+
		"threading.Thread(target=lambda: [os.write(1, b'x' * 65536) for _ in iter(int, 1)], daemon=True).start()")
	closed := make(chan error, 1)
	go func() { closed <- sb.CloseSession(context.Background(), "flood") }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("CloseSession still blocked after 30s")
	}
	if left := owned(t, eng, sb); len(left) != 0 {
		t.Errorf("containers after CloseSession: %v", left)
	}
}

// TestSessionProtocolAbuse: a program that writes garbage to its worker's
// control pipe loses its session at once (no wait for the deadline or for
// an exit that will not come), with a clear note, and the next call gets a
// clean session.
func TestSessionProtocolAbuse(t *testing.T) {
	sb, _ := newSandbox(t, sandbox.Config{})
	tests := []struct{ name, code string }{
		{"endless header", controlFD + "while True: os.write(fd, b'x' * 65536)"},
		{"garbage header", controlFD + "os.write(fd, b'garbage\\n')\nimport time\ntime.sleep(60)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := strings.ReplaceAll(tt.name, " ", "-")
			run(t, sb, id, "state = 1")
			start := time.Now()
			res, err := sb.RunInSession(t.Context(), id, sandbox.SessionProgram{Code: tt.code, Timeout: 60 * time.Second})
			if took := time.Since(start); err != nil || !res.SessionLost || res.TimedOut || took > 10*time.Second {
				t.Fatalf("abusive call: err %v lost=%v timed_out=%v after %v; want the session lost at once", err, res.SessionLost, res.TimedOut, took)
			}
			if !strings.Contains(res.Stderr, "control pipe") {
				t.Errorf("stderr %q; want it to say why the session was discarded", res.Stderr)
			}
			next := run(t, sb, id, "print(globals().get('state', 'clean'))")
			if next.Stdout != "clean\n" || !next.NewSession || !strings.Contains(next.SessionNote, "control pipe") {
				t.Errorf("next call: stdout %q new=%v note %q", next.Stdout, next.NewSession, next.SessionNote)
			}
		})
	}
}

// TestSessionKernelDiedBetweenCalls: when the kernel died after its call
// returned, the next call runs in a fresh session with a note, instead of
// reporting the old session lost without running its code.
func TestSessionKernelDiedBetweenCalls(t *testing.T) {
	sb, eng := newSandbox(t, sandbox.Config{})
	run(t, sb, "dies", "import os, threading\nthreading.Timer(0.2, lambda: os._exit(7)).start()")
	waitFor(t, 20*time.Second, "the kernel's exit", func() bool {
		left := owned(t, eng, sb)
		return len(left) == 0 || len(left) == 1 && left[0].State == "exited" // the daemon removes it once exited
	})
	// Usually the sandbox has seen the exit and runs the call in a new
	// session at once. In the few milliseconds before the daemon's exit
	// event reaches it, the call instead finds the kernel dead: it reports
	// the loss, and the call after it runs in a new session. Either way no
	// call wedges and the note names the exit.
	res := run(t, sb, "dies", "print('hi')")
	if res.SessionLost {
		res = run(t, sb, "dies", "print('hi')")
	}
	if res.Stdout != "hi\n" || res.SessionLost || !res.NewSession || !strings.Contains(res.SessionNote, "status 7") {
		t.Errorf("call after the kernel died: stdout %q lost=%v new=%v note %q; want it run in a new session with a note",
			res.Stdout, res.SessionLost, res.NewSession, res.SessionNote)
	}
}

// TestSessionCapHoldsForConcurrentStarts: first calls with different ids
// at the same moment cannot start more sessions than the cap.
func TestSessionCapHoldsForConcurrentStarts(t *testing.T) {
	sb, _ := newSandbox(t, sandbox.Config{MaxSessions: 2})
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i, id := range []string{"a", "b", "c", "d"} {
		wg.Go(func() {
			_, errs[i] = sb.RunInSession(t.Context(), id, sandbox.SessionProgram{Code: "pass", Python: slowPython(time.Second)})
		})
	}
	wg.Wait()
	limited := 0
	for _, err := range errs {
		switch {
		case errors.Is(err, sandbox.ErrSessionLimit):
			limited++
		case err != nil:
			t.Errorf("unexpected error: %v", err)
		}
	}
	if live := sessionIDs(sb); limited != 2 || len(live) != 2 {
		t.Errorf("%d calls refused, live sessions %v; want 2 refused and 2 live", limited, live)
	}
}

// TestSessionConcurrentFirstCalls: two first calls to one id share one
// session, and only the one that ran first reports it as new.
func TestSessionConcurrentFirstCalls(t *testing.T) {
	sb, _ := newSandbox(t, sandbox.Config{})
	var wg sync.WaitGroup
	res := make([]sandbox.Result, 2)
	for i := range res {
		wg.Go(func() {
			var err error
			res[i], err = sb.RunInSession(t.Context(), "dup", sandbox.SessionProgram{
				Code: "n = globals().get('n', 0) + 1\nprint(n)", Python: slowPython(time.Second)})
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	outs := []string{res[0].Stdout, res[1].Stdout}
	slices.Sort(outs)
	if !slices.Equal(outs, []string{"1\n", "2\n"}) || res[0].NewSession == res[1].NewSession {
		t.Errorf("stdouts %q, new session %v and %v; want one session, new for exactly one call", outs, res[0].NewSession, res[1].NewSession)
	}
}

// TestCloseWhileSessionStarts: Close during a session's start ends the
// start, and the container it created goes; later calls are refused
// without creating any.
func TestCloseWhileSessionStarts(t *testing.T) {
	sb, eng := newSandbox(t, sandbox.Config{})
	done := make(chan error, 1)
	go func() {
		_, err := sb.RunInSession(context.Background(), "late", sandbox.SessionProgram{Code: "pass", Python: slowPython(30 * time.Second)})
		done <- err
	}()
	waitFor(t, 20*time.Second, "the session's container", func() bool { return len(owned(t, eng, sb)) == 1 })
	sb.Close()
	select {
	case err := <-done:
		if err == nil {
			t.Error("the call whose session start was closed succeeded")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the starting call still blocked 20s after Close")
	}
	if left := owned(t, eng, sb); len(left) != 0 {
		t.Fatalf("containers after Close: %v", left)
	}
	if _, err := sb.RunInSession(t.Context(), "after", sandbox.SessionProgram{Code: "pass"}); err == nil {
		t.Error("a call after Close succeeded")
	}
	if left := owned(t, eng, sb); len(left) != 0 {
		t.Errorf("a call after Close created containers: %v", left)
	}
}

// TestCancelWhileSessionStarts: the caller's cancellation returns at once,
// even while the session it waits for is still starting.
func TestCancelWhileSessionStarts(t *testing.T) {
	sb, eng := newSandbox(t, sandbox.Config{})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := sb.RunInSession(ctx, "slow", sandbox.SessionProgram{Code: "pass", Python: slowPython(30 * time.Second)})
		done <- err
	}()
	waitFor(t, 20*time.Second, "the session's container", func() bool { return len(owned(t, eng, sb)) == 1 })
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v; want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the cancelled call still blocked 5s later")
	}
}

// TestFollowImageWaitsForRunningProgram: a call that must restart the
// session on a new image waits for the program running in it instead of
// killing it.
func TestFollowImageWaitsForRunningProgram(t *testing.T) {
	t.Parallel() // its sandbox, folders and servers are its own; the package ends with these, two at a time
	sb, eng := newSandbox(t, sandbox.Config{})
	other := "pybox-test-follow:" + strings.ToLower(sb.Owner().ID)
	if err := eng.TagImage(t.Context(), sb.Image(), other); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.RemoveImage(context.Background(), other) }) // only a tag; the image stays
	started := make(chan struct{})
	var once sync.Once
	first := make(chan sandbox.Result, 1)
	go func() {
		res, err := sb.RunInSession(t.Context(), "env", sandbox.SessionProgram{
			Code:     "import time\nprint('started', flush=True)\ntime.sleep(2)\nprint('finished')",
			OnOutput: func(string, []byte) { once.Do(func() { close(started) }) }})
		if err != nil && !errors.Is(err, sandbox.ErrShutdown) { // Close stops calls in flight: that is no failure
			t.Error(err)
		}
		first <- res
	}()
	<-started
	second, err := sb.RunInSession(t.Context(), "env", sandbox.SessionProgram{Image: other, FollowImage: true, Code: "print('on new image')"})
	if err != nil {
		t.Fatal(err)
	}
	if res := <-first; res.SessionLost || res.Stdout != "started\nfinished\n" {
		t.Errorf("running program: lost=%v stdout %q; want it to finish", res.SessionLost, res.Stdout)
	}
	if second.Stdout != "on new image\n" || !second.NewSession || !strings.Contains(second.SessionNote, "environment changed") {
		t.Errorf("following call: stdout %q new=%v note %q", second.Stdout, second.NewSession, second.SessionNote)
	}
}

// startLong starts a long program in session id and returns once it runs;
// the channel gets its result.
func startLong(t *testing.T, sb *sandbox.Sandbox, id string) <-chan sandbox.Result {
	t.Helper()
	started := make(chan struct{})
	var once sync.Once
	out := make(chan sandbox.Result, 1)
	go func() {
		res, err := sb.RunInSession(context.Background(), id, sandbox.SessionProgram{
			Code:     "import time\nprint('running', flush=True)\ntime.sleep(120)",
			Timeout:  3 * time.Minute,
			OnOutput: func(string, []byte) { once.Do(func() { close(started) }) }})
		if err != nil && !errors.Is(err, sandbox.ErrShutdown) { // Close stops calls in flight: that is no failure
			t.Error(err)
		}
		out <- res
	}()
	<-started
	return out
}

// lostWithin waits for a running call that must end with its session lost.
func lostWithin(t *testing.T, results <-chan sandbox.Result, d time.Duration) {
	t.Helper()
	select {
	case res := <-results:
		if !res.SessionLost || res.TimedOut {
			t.Errorf("running call: lost=%v timed_out=%v; want its session lost", res.SessionLost, res.TimedOut)
		}
	case <-time.After(d):
		t.Fatalf("the running call did not return within %v", d)
	}
}

// TestCloseSessionWhileRunning: closing a session kills the program it
// runs, and the next call is told the session was closed (not that its
// Python process exited with the kill's status).
func TestCloseSessionWhileRunning(t *testing.T) {
	sb, eng := newSandbox(t, sandbox.Config{})
	results := startLong(t, sb, "busy")
	if err := sb.CloseSession(t.Context(), "busy"); err != nil {
		t.Fatal(err)
	}
	lostWithin(t, results, 20*time.Second)
	if left := owned(t, eng, sb); len(left) != 0 {
		t.Errorf("containers after CloseSession: %v", left)
	}
	next := run(t, sb, "busy", "print('again')")
	if next.Stdout != "again\n" || !next.NewSession || !strings.Contains(next.SessionNote, "closed") {
		t.Errorf("next call: stdout %q new=%v note %q; want a new session noted as closed", next.Stdout, next.NewSession, next.SessionNote)
	}
}

// TestCloseWhileRunning: Close ends a running program and its session and
// leaves no container.
func TestCloseWhileRunning(t *testing.T) {
	sb, eng := newSandbox(t, sandbox.Config{})
	results := startLong(t, sb, "busy")
	closed := make(chan struct{})
	go func() {
		sb.Close()
		close(closed)
	}()
	lostWithin(t, results, 20*time.Second)
	select {
	case <-closed:
	case <-time.After(20 * time.Second):
		t.Fatal("Close still blocked after 20s")
	}
	if left := owned(t, eng, sb); len(left) != 0 {
		t.Errorf("containers after Close: %v", left)
	}
}

// TestSessionFloodHitsCapAndDeadline: a session program that floods its
// output is capped and killed at its deadline, never wedging the call.
func TestSessionFloodHitsCapAndDeadline(t *testing.T) {
	sb, eng := newSandbox(t, sandbox.Config{Limits: sandbox.Limits{OutputBytes: 64 << 10}})
	start := time.Now()
	res, err := sb.RunInSession(t.Context(), "flood", sandbox.SessionProgram{
		Code: "import sys\nwhile True:\n    print('x' * 1000)\n    print('y' * 1000, file=sys.stderr)", Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut || !res.Truncated || !res.SessionLost || len(res.Stdout) != 64<<10 || time.Since(start) > 20*time.Second {
		t.Errorf("flood: timed_out=%v truncated=%v lost=%v stdout %d bytes after %v", res.TimedOut, res.Truncated, res.SessionLost, len(res.Stdout), time.Since(start))
	}
	if left := owned(t, eng, sb); len(left) != 0 {
		t.Errorf("containers after the flood: %v", left)
	}
}

// TestSessionBigRequestWhileThreadFloods: a thread of an earlier program
// floods output while no call reads it, so the runner is stuck writing;
// the next call's large request still gets through (the request is sent
// while the output is read), instead of both sides waiting for the deadline.
func TestSessionBigRequestWhileThreadFloods(t *testing.T) {
	sb, _ := newSandbox(t, sandbox.Config{})
	run(t, sb, "flood", "import os, threading\n"+
		"threading.Thread(target=lambda: [os.write(1, b'x' * 65536) for _ in range(200)], daemon=True).start()")
	time.Sleep(time.Second) // let the flood fill every buffer between the thread and us
	big := "print('big ok')\n#" + strings.Repeat("y", 1<<20) + "\n"
	res, err := sb.RunInSession(t.Context(), "flood", sandbox.SessionProgram{Code: big, Timeout: 30 * time.Second})
	if err != nil || res.TimedOut || res.SessionLost || !strings.HasSuffix(res.Stdout, "big ok\n") && !res.Truncated {
		t.Fatalf("big request after a flood: err %v timed_out %v lost %v stdout tail %q", err, res.TimedOut, res.SessionLost,
			res.Stdout[max(0, len(res.Stdout)-20):])
	}
	if res.Duration > 20*time.Second {
		t.Errorf("the call took %v; want it to go through without waiting for a deadline", res.Duration)
	}
}

// TestSessionEarlyDoneThenLateEnd: a program that ends its own turn early
// through the control pipe and runs on: its real end, reported later, is
// not taken for the next call's, which gets its own result, and the
// session goes on.
func TestSessionEarlyDoneThenLateEnd(t *testing.T) {
	sb, _ := newSandbox(t, sandbox.Config{})
	early := controlFD + "import time\n" +
		"import sys\nf = sys._getframe()\nwhile 'req' not in f.f_locals: f = f.f_back\nseq = f.f_locals['req']['seq']\n" +
		"os.write(fd, b'done %d 0\\n' % seq)\ntime.sleep(1)\nprint('late')\n"
	if res := run(t, sb, "early", early); res.ExitCode != 0 || res.SessionLost {
		t.Fatalf("early done: %+v", res)
	}
	second := run(t, sb, "early", "print('second')")
	if second.SessionLost || !strings.HasSuffix(second.Stdout, "second\n") {
		t.Errorf("the next call got %q (lost=%v); want its own output after the late one", second.Stdout, second.SessionLost)
	}
	if third := run(t, sb, "early", "print('third')"); third.Stdout != "third\n" || third.SessionLost || third.NewSession {
		t.Errorf("third call: %+v; want only its own output, same session", third)
	}
}
