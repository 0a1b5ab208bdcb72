//go:build linux

package sandbox_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pybox-dev/pybox/internal/contract"
	"github.com/pybox-dev/pybox/internal/testenv"
	"github.com/pybox-dev/pybox/sandbox"
)

// hogKernel takes every inotify instance its uid may have and pipe
// buffers past the per-uid soft limit (fs.pipe-user-pages-soft), says
// so, and holds them until it is stopped.
const hogKernel = `import ctypes, fcntl, os, resource, time
libc = ctypes.CDLL(None, use_errno=True)
inotify, pipes = [], []
while len(inotify) < resource.getrlimit(resource.RLIMIT_NOFILE)[0] - 300:  # gVisor has no per-uid cap: leave fds for the pipes
    fd = libc.inotify_init1(0)
    if fd < 0:
        break
    inotify.append(fd)
errno = ctypes.get_errno()
for _ in range(128):
    r, w = os.pipe()
    pipes.append((r, w))
    try:
        fcntl.fcntl(w, 1031, 1 << 20)  # F_SETPIPE_SZ: 256 pages each, charged to the uid
    except OSError:
        pass  # past the soft limit: the new pipes that follow take the uid further past it
print("held", len(inotify), errno, fcntl.fcntl(pipes[-1][1], 1032), os.getuid(), flush=True)
time.sleep(120)  # until the test ends it
`

// neighbourKernel reports whether it got an inotify instance and the size
// of a new pipe (a uid past its pipe soft limit gets 2 pages, not 16).
const neighbourKernel = `import ctypes, fcntl, os
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init1(0)
r, w = os.pipe()
print(fd >= 0, ctypes.get_errno() if fd < 0 else 0, fcntl.fcntl(w, 1032), os.getuid())
`

// TestKernelBudgetsPerSandbox: the kernel charges inotify instances and
// pipe buffers per uid, and no container limit bounds them. A program that
// takes all of its uid's budget must not make a concurrent neighbour fail,
// nor a host process of the uid every sandbox used to share (the runtime
// image's user, 10001, which may be a host account too).
func TestKernelBudgetsPerSandbox(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("uids of their own need a server that runs as root")
	}
	for _, rt := range testenv.Runtimes(t, testenv.Docker(t)) {
		t.Run(testenv.RuntimeName(rt), func(t *testing.T) { testKernelBudgets(t, rt) })
	}
}

func testKernelBudgets(t *testing.T, rt string) {
	ws := workspace(t, neighbourKernel)
	if err := os.Chmod(ws, 0o777); err != nil {
		t.Fatal(err)
	}
	sb, _ := newSandbox(t, sandbox.Config{Runtime: rt, WarmPool: -1})
	hog, stop, hogDone := startHog(t, sb)
	defer func() { stop(); <-hogDone }()
	t.Logf("hog: %s", hog)
	var n, errno, pipe, hogUID int
	if _, err := fmt.Sscanf(hog, "held %d %d %d %d", &n, &errno, &pipe, &hogUID); err != nil {
		t.Fatalf("hog said %q: %v", hog, err)
	}
	host := hostProcessOf(t, 10001)
	if host != "ok 65536" {
		t.Errorf("a host process of uid 10001 beside the hog (%s): %s; want ok 65536", hog, host)
	}
	code := neighbourKernel
	sample, err := sb.Run(t.Context(), sandbox.Program{File: "main.py", Source: &code, Timeout: time.Minute})
	checkNeighbour(t, "an eval sample (scratch workspace)", hog, hogUID, sample, err)
	run, err := sb.Run(t.Context(), sandbox.Program{Workspace: ws, File: "main.py", Timeout: time.Minute})
	checkNeighbour(t, "a run in code storage", hog, hogUID, run, err)
	cell, err := sb.RunInSession(t.Context(), "beside", sandbox.SessionProgram{Workspace: ws, Code: neighbourKernel, Filename: "/workspace/cell.py"})
	checkNeighbour(t, "a session", hog, hogUID, cell, err)
}

// startHog starts hogKernel as a `pybox eval` sample (its workspace a
// private tmpfs) and returns what it holds once it says so, a function
// that stops it, and a channel closed when its run has ended.
func startHog(t *testing.T, sb *sandbox.Sandbox) (string, context.CancelFunc, chan struct{}) {
	t.Helper()
	ctx, stop := context.WithCancel(t.Context())
	held := make(chan string, 1)
	done := make(chan struct{})
	code := hogKernel
	go func() {
		defer close(done)
		var out strings.Builder
		res, err := sb.Run(ctx, sandbox.Program{File: "hog.py", Source: &code, Timeout: 2 * time.Minute,
			OnOutput: func(stream string, b []byte) {
				if out.WriteString(string(b)); stream == "stdout" && strings.HasSuffix(out.String(), "\n") {
					select {
					case held <- strings.TrimSpace(out.String()):
					default:
					}
				}
			}})
		if ctx.Err() == nil {
			t.Errorf("the hog ended before it was stopped: %v %+v", err, res)
		}
	}()
	select {
	case h := <-held:
		return h, stop, done
	case <-done:
	case <-time.After(time.Minute):
	}
	stop()
	<-done
	t.Fatal("the hog did not say what it held within a minute")
	return "", nil, nil
}

// checkNeighbour checks that a neighbour of the hog ran as a uid of its
// own and got an inotify instance and a full-size pipe.
func checkNeighbour(t *testing.T, who, hog string, hogUID int, res sandbox.Result, err error) {
	t.Helper()
	var ok bool
	var errno, pipeSize, uid int
	if err != nil {
		t.Errorf("%s beside the hog: %v", who, err)
		return
	}
	if _, err := fmt.Sscanf(res.Stdout, "%t %d %d %d", &ok, &errno, &pipeSize, &uid); err != nil || res.ExitCode != 0 {
		t.Errorf("%s: exit %d, stdout %q, stderr %q (%v)", who, res.ExitCode, res.Stdout, res.Stderr, err)
		return
	}
	if !ok || pipeSize != 65536 {
		t.Errorf("%s (uid %d) beside the hog (%s): inotify_init1 ok %v (errno %d), new pipe %d bytes; want ok and 65536",
			who, uid, hog, ok, errno, pipeSize)
	}
	if uid == hogUID || uid < contract.SandboxUIDBase {
		t.Errorf("%s ran as uid %d, the hog as %d: want a uid of its own each", who, uid, hogUID)
	}
}

// hostProcessOf reports what a host thread running as uid (and gid) gets:
// "ok" or the error of inotify_init1, and the size of a new pipe. The
// thread drops root for good, so it ends with its goroutine.
func hostProcessOf(t *testing.T, uid int) string {
	t.Helper()
	got := make(chan string, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread goes with the goroutine
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(uid), uintptr(uid), uintptr(uid)); e != 0 {
			got <- "setresgid: " + e.Error()
			return
		}
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(uid), uintptr(uid), uintptr(uid)); e != 0 {
			got <- "setresuid: " + e.Error()
			return
		}
		fd, err := unix.InotifyInit1(unix.IN_CLOEXEC)
		if err != nil {
			got <- "inotify_init1: " + err.Error()
			return
		}
		unix.Close(fd)
		var p [2]int
		if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
			got <- "pipe: " + err.Error()
			return
		}
		size, err := unix.FcntlInt(uintptr(p[1]), unix.F_GETPIPE_SZ, 0)
		unix.Close(p[0])
		unix.Close(p[1])
		got <- fmt.Sprintf("ok %d %v", size, err)
	}()
	return strings.TrimSuffix(<-got, " <nil>")
}
