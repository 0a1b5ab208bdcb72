//go:build !windows

package main

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/pybox-dev/pybox/internal/engine"
	"github.com/pybox-dev/pybox/internal/testenv"
)

// TestServeSparesLiveServerSameHostname: a server starting beside a live
// one that has the same hostname and pid in another PID namespace (two
// servers in containers: both are pid 1) removes none of its containers,
// whether they share the state directory or not. The live server's session
// keeps its variables.
func TestServeSparesLiveServerSameHostname(t *testing.T) {
	for _, shared := range []bool{true, false} {
		t.Run(map[bool]string{true: "shared state dir", false: "own state dirs"}[shared], func(t *testing.T) {
			host := "pbx-" + randomHex(t, 6) // only these two servers have it
			stateA, stateB := t.TempDir(), t.TempDir()
			if shared {
				stateB = stateA
			}
			a := startNamespaced(t, host, "PYBOX_STATE_DIR="+stateA)
			if out := a.sessionRun("keep", "x = 42"); out.ExitCode != 0 {
				t.Fatalf("A's session: exit %d stderr %q", out.ExitCode, out.Stderr)
			}
			ownerA := a.adopt(host)
			kept := a.containers()
			b := startNamespaced(t, host, "PYBOX_STATE_DIR="+stateB) // it reaps before it answers
			if left := a.containers(); len(left) != len(kept) {
				t.Errorf("B's start removed the live server A's containers: %d of %d left", len(left), len(kept))
			}
			if out := a.sessionRun("keep", "print(x)"); out.Stdout != "42\n" || out.NewSession {
				t.Errorf("A's session after B started: stdout %q stderr %q new=%v; want 42 in the same session", out.Stdout, out.Stderr, out.NewSession)
			}
			if out := b.sessionRun("b", "print(1)"); out.Stdout != "1\n" {
				t.Errorf("B's session: stdout %q stderr %q", out.Stdout, out.Stderr)
			}
			b.adopt(host, ownerA)
		})
	}
}

// startNamespaced starts `pybox serve` as pid 1 of a new PID namespace
// whose hostname is host, as a server in a container runs. Its warm pool
// is off, so it creates containers only when called.
func startNamespaced(t *testing.T, host string, env ...string) *server {
	t.Helper()
	needUnshare(t)
	cmd := exec.Command("unshare", "--uts", "--pid", "--fork", "--kill-child",
		"sh", "-c", `hostname "$0" && exec "$1" serve`, host, pyboxBin)
	s := launch(t, nil, cmd, append([]string{"PYBOX_WARM_POOL=0"}, env...)...)
	s.labels = map[string]string{"pybox.host": host, "pybox.owner": "none yet"} // see adopt
	return s
}

// startWithHostname starts `pybox serve` in a new UTS namespace whose
// hostname is host, in this PID namespace: the process started is pybox
// itself (unshare and sh exec it), so its pid label is its real pid.
func startWithHostname(t *testing.T, host string, env ...string) *server {
	t.Helper()
	needUnshare(t)
	cmd := exec.Command("unshare", "--uts", "sh", "-c", `hostname "$0" && exec "$1" serve`, host, pyboxBin)
	return launch(t, nil, cmd, append([]string{"PYBOX_WARM_POOL=0"}, env...)...)
}

func needUnshare(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("unshare"); err != nil || os.Geteuid() != 0 {
		t.Skip("needs root and unshare(1) to start a server in new namespaces")
	}
}

// adopt finds the owner of s's containers (those with the host label whose
// owner is none of others) and returns it; from then on s's containers are
// that owner's.
func (s *server) adopt(host string, others ...string) string {
	s.t.Helper()
	var owners []string
	for _, c := range testenv.Managed(s.t, s.eng, map[string]string{"pybox.host": host}) {
		if o := c.Labels["pybox.owner"]; !slices.Contains(others, o) && !slices.Contains(owners, o) {
			owners = append(owners, o)
		}
	}
	if len(owners) != 1 {
		s.t.Fatalf("owners of the server's containers: %v; want exactly one", owners)
	}
	s.labels = map[string]string{"pybox.owner": owners[0]}
	return owners[0]
}

// randomHex is n random bytes in hex.
func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// TestServeReapsKilledServer: the containers of a server killed with
// SIGKILL (no clean-up ran) are removed, with its lease file, when the next
// server on the same state directory starts. A container without a lease
// (an older pybox's) is left alone. The killed server has a hostname of its
// own, so that pid-based reapers of older pybox builds running on this
// daemon at the same time do not race this one for its containers.
func TestServeReapsKilledServer(t *testing.T) {
	eng := testenv.Docker(t)
	testenv.RuntimeImage(t, eng, "base")
	state := t.TempDir()
	legacy := createLabelled(t, eng, "pybox-run-legacy"+randomHex(t, 6), map[string]string{
		"pybox.managed": "true", "pybox.owner": "legacy", "pybox.host": "elsewhere", "pybox.pid": "999999999"})
	a := startWithHostname(t, "pbx-"+randomHex(t, 6), "PYBOX_STATE_DIR="+state)
	if out := a.sessionRun("doomed", "x = 1"); out.ExitCode != 0 {
		t.Fatalf("A's session: exit %d stderr %q", out.ExitCode, out.Stderr)
	}
	left := a.containers()
	leases, _ := filepath.Glob(filepath.Join(state, "owners", "*.lock"))
	if len(left) == 0 || len(leases) != 1 || left[0].Labels["pybox.lease"] != leases[0] {
		t.Fatalf("A's containers %v, leases %v; want containers labelled with A's one lease", left, leases)
	}
	a.kill()
	startServer(t, "PYBOX_STATE_DIR="+state) // it reaps before it answers
	if got := a.containers(); len(got) != 0 {
		t.Errorf("the killed server's containers are still there: %v", got)
	}
	if _, err := os.Lstat(leases[0]); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the killed server's lease file: %v; want it removed", err)
	}
	if !slices.ContainsFunc(testenv.Managed(t, eng, nil), func(c engine.Summary) bool { return c.ID == legacy }) {
		t.Errorf("the container without a lease was removed")
	}
}

// kill ends the server with SIGKILL, as a crash would, and waits until it
// has exited (so the kernel has dropped its lease). It never calls
// cmd.Wait itself: the SDK's command transport does, when the session
// closes, and two concurrent Waits on one Cmd can block forever (CI hung
// 40 minutes on exactly that).
func (s *server) kill() {
	s.t.Helper()
	s.killed = true
	pid := s.cmd.Process.Pid
	if err := s.cmd.Process.Kill(); err != nil {
		s.t.Fatal(err)
	}
	_ = s.cs.Close() // reaps the process; "signal: killed", as meant
	deadline := time.Now().Add(30 * time.Second)
	for !exited(pid) {
		if time.Now().After(deadline) {
			s.t.Fatalf("the killed server (pid %d) has not exited after 30 s", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// exited reports whether process pid has ended: it is gone, or a zombie
// (whose open files, and so its lease, the kernel has already released).
func exited(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// The state follows the command name in parentheses, which may itself
	// hold spaces or parentheses: take what follows the last ')'.
	rest := stat[bytes.LastIndexByte(stat, ')')+1:]
	f := bytes.Fields(rest)
	return len(f) > 0 && (f[0][0] == 'Z' || f[0][0] == 'X')
}
