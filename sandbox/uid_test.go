package sandbox_test

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pybox-dev/pybox/internal/testenv"
	"github.com/pybox-dev/pybox/sandbox"
)

// hogKernel takes every inotify instance its uid may have and pipe
// buffers past the per-uid soft limit (fs.pipe-user-pages-soft), says
// so, and holds them until the file release appears.
const hogKernel = `import ctypes, fcntl, os, time
libc = ctypes.CDLL(None, use_errno=True)
inotify, pipes = [], []
while len(inotify) < 4096:
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
deadline = time.time() + 60
while not os.path.exists("/workspace/release") and time.time() < deadline:
    time.sleep(0.02)
`

// neighbourKernel reports whether it got an inotify instance and the size
// of a new pipe (a uid past its pipe soft limit gets 2 pages, not 16), then
// lets the hog go.
const neighbourKernel = `import ctypes, fcntl, os
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init1(0)
r, w = os.pipe()
print(fd >= 0, ctypes.get_errno() if fd < 0 else 0, fcntl.fcntl(w, 1032), os.getuid())
open("/workspace/release", "w").close()
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
	ws := workspace(t, "")
	if err := os.Chmod(ws, 0o777); err != nil {
		t.Fatal(err)
	}
	writeFile(t, ws, "hog.py", hogKernel)
	writeFile(t, ws, "neighbour.py", neighbourKernel)
	sb, _ := newSandbox(t, sandbox.Config{Runtime: rt, WarmPool: -1})
	held := make(chan string, 1)
	type outcome struct {
		res sandbox.Result
		err error
	}
	hogDone := make(chan outcome, 1)
	go func() {
		var out strings.Builder
		res, err := sb.Run(t.Context(), sandbox.Program{Workspace: ws, File: "hog.py", Timeout: 90 * time.Second,
			OnOutput: func(stream string, b []byte) {
				if out.WriteString(string(b)); stream == "stdout" && strings.HasSuffix(out.String(), "\n") {
					select {
					case held <- out.String():
					default:
					}
				}
			}})
		hogDone <- outcome{res, err}
	}()
	var hog string
	select {
	case hog = <-held:
	case o := <-hogDone:
		t.Fatalf("the hog ended before it held anything: %v %+v", o.err, o.res)
	case <-time.After(60 * time.Second):
		t.Fatal("the hog did not say what it held within 60s")
	}
	t.Logf("hog: %s", strings.TrimSpace(hog))
	host := hostProcessOf(t, 10001)
	res, err := sb.Run(t.Context(), sandbox.Program{Workspace: ws, File: "neighbour.py", Timeout: 60 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var hogN, hogErrno, hogPipes, hogUID, nbUID, pipeSize int
	var nbOK bool
	var nbErrno int
	fmt.Sscanf(hog, "held %d %d %d %d", &hogN, &hogErrno, &hogPipes, &hogUID)
	if _, err := fmt.Sscanf(res.Stdout, "%t %d %d %d", &nbOK, &nbErrno, &pipeSize, &nbUID); err != nil || res.ExitCode != 0 {
		t.Fatalf("neighbour: exit %d, stdout %q, stderr %q (%v)", res.ExitCode, res.Stdout, res.Stderr, err)
	}
	if !nbOK || pipeSize != 65536 {
		t.Errorf("neighbour (uid %d) beside the hog (uid %d, %d inotify instances, its last pipe %d bytes): inotify_init1 ok %v (errno %d), new pipe %d bytes; want ok and 65536",
			nbUID, hogUID, hogN, hogPipes, nbOK, nbErrno, pipeSize)
	}
	if host != "ok 65536" {
		t.Errorf("a host process of uid 10001 beside the hog: %s; want ok 65536", host)
	}
	if nbUID == hogUID || nbUID < 10000 {
		t.Errorf("the neighbour ran as uid %d, the hog as %d: want a uid of its own each", nbUID, hogUID)
	}
	o := <-hogDone
	if o.err != nil || o.res.ExitCode != 0 {
		t.Errorf("hog: %v, exit %d, stderr %q", o.err, o.res.ExitCode, o.res.Stderr)
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
