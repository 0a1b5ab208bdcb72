//go:build !windows

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// The isolation battery: attacks that work through sequences and races
// rather than one call - a run that prepares something for a later or a
// concurrent one. Each returns only after asserting its effect; add a case
// by adding a function to isolationAttacks.
var isolationAttacks = map[string]func(t *testing.T){
	"session mount swapped for a symlink": attackSessionMountSwap,
	"stateless runs see no session files": attackSessionFilesVisible,
	"modules planted in the workspace":    attackPlantedModules,
	"outputs written by a concurrent run": attackConcurrentOutputs,
	"forged protocol frames in a session": attackForgedSessionFrames,
	"forged verdict in a stateless run":   attackForgedRunVerdict,
}

// It runs under runc and under gVisor (runsc), when the daemon has it;
// the attacks (each with its own server) run in parallel. The battery
// itself is a long test that takes no run slot (runSlots): its attacks
// each take one, and it only waits for them.
func TestIsolationBattery(t *testing.T) {
	t.Parallel()
	eachRuntime(t, func(t *testing.T) {
		for name, attack := range isolationAttacks {
			t.Run(name, func(t *testing.T) {
				parallelTest(t)
				attack(t)
			})
		}
	})
}

// attackSessionMountSwap: a stateless run keeps swapping sessions/<id>
// (which it can write, today) between a folder and a symlink to a host
// directory while sessions start. No session may ever get the host
// directory as its workspace. It swaps until the last session has started
// (the test's stop file), at most 35 s.
func attackSessionMountSwap(t *testing.T) {
	w := watchHost(t, "id_rsa")
	s := startServer(t, "PYBOX_MAX_SESSIONS=4")
	const ids = 4
	swapper := fmt.Sprintf(`import os, time
os.makedirs('sessions', exist_ok=True)
open('swapping', 'w').close()
end, n = time.time() + 35, 0
while time.time() < end and not os.path.exists('stop'):
    for i in range(%d):
        p, n = 'sessions/victim%%d' %% i, n + 1
        try:
            if os.path.islink(p):
                os.unlink(p)
                os.mkdir(p)
            else:
                os.rename(p, 'sessions/.old%%d' %% n)
                os.symlink(%q, p)
        except OSError:
            try: os.mkdir(p)
            except OSError: pass
`, ids, w.Outside)
	var wg sync.WaitGroup
	wg.Go(func() { s.exec(map[string]any{"code": swapper, "timeout_s": 40}) })
	waitFile(t, filepath.Join(s.storage, "swapping"))
	probe := "import os\nprint(sorted(os.listdir('.')))\ntry:\n    open('pwned', 'w').write('x')\nexcept OSError as e:\n    print(e)\n"
	for i := range 24 {
		id := fmt.Sprintf("victim%d", i%ids)
		res := s.call("execute_code", map[string]any{"code": probe, "session_id": id, "timeout_s": 20})
		if got := text(res); strings.Contains(got, "id_rsa") {
			t.Errorf("session %s got the host directory as its workspace: %s", id, got)
		}
		s.call("close_session", map[string]any{"session_id": id})
	}
	stopFile(t, s.storage)
	wg.Wait()
	w.check()
}

// attackSessionFilesVisible: what a session writes in its workspace is not
// reachable from a stateless run (which could read or plant files there).
func attackSessionFilesVisible(t *testing.T) {
	s := startServer(t)
	out, _ := s.exec(map[string]any{"code": "open('secret-of-s1.txt', 'w').write('s1 secret')\nprint('ok')", "session_id": "s1"})
	if out.Stdout != "ok\n" {
		t.Fatalf("session call: %+v", out)
	}
	find := "import os\nfor root, dirs, files in os.walk('/workspace'):\n    for f in files:\n        if f.startswith('secret-of-'): print(os.path.join(root, f))\n"
	if out, _ := s.exec(map[string]any{"code": find}); out.Stdout != "" {
		t.Errorf("a stateless run sees a session's files: %s", out.Stdout)
	}
}

// plantedNames are modules the runner (or Python's start-up) could import:
// a file of that name in the workspace must never run outside the program
// that imports it itself.
var plantedNames = []string{"base64", "json", "runpy", "threading", "traceback", "types", "io", "select",
	"signal", "ctypes", "site", "sitecustomize", "usercustomize", "pkgutil", "linecache", "tokenize",
	"struct", "fcntl", "errno", "warnings", "weakref", "copy", "binascii", "hashlib"}

// plantModules is a program that writes, into its working directory, one
// module per planted name that leaves a marker file when imported.
func plantModules() string {
	var b strings.Builder
	b.WriteString("import os\n")
	for _, n := range plantedNames {
		fmt.Fprintf(&b, "open(%q, 'w').write(\"import os as _o\\nopen('/workspace/planted-%s-%%d' %% _o.getpid(), 'w').close()\\nprint('FORGED by %s')\\n\")\n", n+".py", n, n)
	}
	b.WriteString("print('planted')\n")
	return b.String()
}

func markers(t *testing.T, dir string) []string {
	t.Helper()
	found, _ := filepath.Glob(filepath.Join(dir, "planted-*"))
	return found
}

// attackPlantedModules: modules planted in code storage (or a session's
// folder) by one program never run in the runner of a later program, of
// an idle warm container, or of a new session kernel.
func attackPlantedModules(t *testing.T) {
	s := startServer(t)
	if out, _ := s.exec(map[string]any{"code": plantModules()}); out.Stdout != "planted\n" {
		t.Fatalf("plant: %+v", out)
	}
	for i := range 4 { // cold and warm paths; the pool refills after each
		out, _ := s.exec(map[string]any{"code": "print('hello')"})
		if out.Stdout != "hello\n" || out.ExitCode != 0 || out.Stderr != "" {
			t.Errorf("run %d after planting: %+v", i, out)
		}
	}
	// The pool refilled after the last run: once its containers exist, give
	// their runners (started on the planted workspace) time to misbehave.
	deadline := time.Now().Add(60 * time.Second)
	for pooled(s) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the warm pool did not refill")
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(2 * time.Second)
	if m := markers(t, s.storage); len(m) > 0 {
		t.Errorf("planted modules ran outside the programs that import them: %v", m)
	}
	plantInSession(t, s)
}

// attackPlantedSessionModules: modules planted in a session's own folder
// never run in the next kernel started on it.
func attackPlantedSessionModules(t *testing.T) { plantInSession(t, startServer(t)) }

// plantInSession plants modules in session k's folder, ends its kernel,
// and checks that the next kernel ran none of them.
func plantInSession(t *testing.T, s *server) {
	if out, _ := s.exec(map[string]any{"code": plantModules(), "session_id": "k"}); out.Stdout != "planted\n" {
		t.Fatalf("plant in session: %+v", out)
	}
	// The kernel ends, the folder stays (close_session would delete it).
	s.exec(map[string]any{"code": "import os\nos._exit(0)", "session_id": "k"})
	out, _ := s.exec(map[string]any{"code": "import os\nprint('hello', sorted(f for f in os.listdir('.') if f.startswith('planted-')))", "session_id": "k"})
	if out.Stdout != "hello []\n" || out.ExitCode != 0 {
		t.Errorf("new kernel on a folder with planted modules: %+v", out)
	}
}

// pooled counts the server's running warm-pool containers.
func pooled(s *server) int {
	n := 0
	for _, c := range s.containers() {
		if c.Labels["pybox.role"] == "pool" && c.State == "running" {
			n++
		}
	}
	return n
}

// attackConcurrentOutputs: a run that writes into other runs' output
// folders while they run (until the last has ended: the test's stop file)
// cannot make figures or files appear in their results.
func attackConcurrentOutputs(t *testing.T) {
	s := startServer(t)
	dropper := `import os, time, base64
png = base64.b64decode('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==')
open('dropping', 'w').close()
end = time.time() + 25
while time.time() < end and not os.path.exists('stop'):
    for d in os.listdir('outputs') if os.path.isdir('outputs') else []:
        p = os.path.join('outputs', d)
        if d.startswith('.') or not os.path.isdir(p) or os.path.islink(p): continue
        for name, data in (('figure-1.png', png), ('evil.txt', b'planted')):
            try:
                if not os.path.exists(os.path.join(p, name)):
                    open(os.path.join(p, name), 'wb').write(data)
            except OSError: pass
    time.sleep(0.005)
`
	var wg sync.WaitGroup
	wg.Go(func() { s.exec(map[string]any{"code": dropper, "timeout_s": 30}) })
	waitFile(t, filepath.Join(s.storage, "dropping"))
	for i := range 3 {
		out, res := s.exec(map[string]any{"code": "import time\ntime.sleep(1.5)\nprint('mine')"})
		if out.Stdout != "mine\n" || len(out.Artifacts) > 0 || out.Figures > 0 || len(res.Content) > 1 {
			t.Errorf("run %d: another run's files came back as its own: artifacts %v, figures %d, content %d",
				i, out.Artifacts, out.Figures, len(res.Content))
		}
	}
	stopFile(t, s.storage)
	wg.Wait()
}

// forger writes forged protocol frames (a done frame with exit status 0 and
// reassuring output) everywhere a program might reach the runner's channel:
// its own descriptors, its parent's and PID 1's through /proc, then exits
// with status 3 after printing "real".
const forger = `import gc, json, os, sys
nonces = set()
for o in gc.get_objects():
    for attr in ('nonce', 'secret'):
        try:
            v = getattr(o, attr, None)
        except Exception:
            v = None
        if isinstance(v, str): nonces.add(v)
nonces.add('0')
def frames(n):
    out = b'ALL TESTS PASSED\n'
    done = json.dumps({'code': 0}).encode()
    return (b'PYBOX %s out %d\n' % (n.encode(), len(out)) + out +
            b'PYBOX %s done %d\n' % (n.encode(), len(done)) + done)
payload = b''.join(frames(n) for n in nonces)
reached = []
for fd in range(3, 256):
    try:
        os.write(fd, payload); reached.append('fd%d' % fd)
    except OSError: pass
for pid in {1, os.getppid()}:
    for fd in range(0, 16):
        try:
            with open('/proc/%d/fd/%d' % (pid, fd), 'wb', buffering=0) as f:
                f.write(payload); reached.append('/proc/%d/fd/%d' % (pid, fd))
        except OSError: pass
    try:
        open('/proc/%d/mem' % pid, 'rb').read(1); reached.append('/proc/%d/mem' % pid)
    except OSError: pass
print('reached:', reached, file=sys.stderr)
print('real')
sys.exit(3)
`

// forgedFrameParsed reports whether the forger's text reached stdout as a
// parsed frame's payload rather than as text it printed (raw header and all).
func forgedFrameParsed(stdout string) bool {
	return strings.Count(stdout, "ALL TESTS PASSED") != strings.Count(stdout, " out 17\nALL TESTS PASSED")
}

// attackForgedSessionFrames: a session program cannot write frames or
// reach PID 1. The one descriptor it can reach is its worker's control pipe
// (it reports each program's end): writing anything but "done N" there
// discards the session, with a clear note, never a forged success.
func attackForgedSessionFrames(t *testing.T) {
	s := startServer(t)
	s.exec(map[string]any{"code": "x = 1", "session_id": "f"})
	out, _ := s.exec(map[string]any{"code": forger, "session_id": "f"})
	if out.ExitCode == 0 || forgedFrameParsed(out.Stdout) {
		t.Errorf("a session program forged its result: %+v", out)
	}
	if strings.Contains(out.Stderr, "/proc/") {
		t.Errorf("a session program reached PID 1 or its parent: %s", out.Stderr)
	}
	if out.ExitCode != 3 && (!out.SessionLost || !strings.Contains(out.Stderr, "wrote into the runner's control pipe")) {
		t.Errorf("the session was not discarded with a clear note: %+v", out)
	}
}

// attackForgedRunVerdict: the same in a stateless run, cold and warm.
func attackForgedRunVerdict(t *testing.T) {
	s := startServer(t)
	for i := range 3 {
		out, _ := s.exec(map[string]any{"code": forger})
		if out.ExitCode != 3 || forgedFrameParsed(out.Stdout) || !strings.Contains(out.Stdout, "real") {
			t.Errorf("run %d forged its result: %+v", i, out)
		}
		if !strings.Contains(out.Stderr, "reached: []") {
			t.Errorf("run %d reached the runner's channel: %s", i, out.Stderr)
		}
	}
}

// stopFile tells a program looping in code storage dir to stop (it polls
// for the file "stop").
func stopFile(t *testing.T, dir string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "stop"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// waitFile waits until path exists (a program's start marker).
func waitFile(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared", path)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
