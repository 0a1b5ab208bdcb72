package images

import (
	"fmt"
	"os/exec"
	"regexp"
	"testing"

	"github.com/pybox-dev/pybox/internal/egressmux"
)

// TestRunnerChannelLimits: the runner's egress channel opens no more
// streams, and sends no more per stream and per message, than the
// server's end (egressmux) takes: a runner past them would end every run
// that uses the network with a protocol error.
func TestRunnerChannelLimits(t *testing.T) {
	for name, want := range map[string]int{"EGRESS_MAX": egressmux.DefaultStreams, "EGRESS_WINDOW": egressmux.DefaultWindow, "EGRESS_DATA": egressmux.MaxData} {
		m := regexp.MustCompile(`(?m)^` + name + ` = (\d+)(?: << (\d+))?\b`).FindStringSubmatch(string(forwardPy))
		if m == nil {
			t.Fatalf("%s not found in forward.py", name)
		}
		var n, shift int
		fmt.Sscan(m[1], &n)
		if m[2] != "" {
			fmt.Sscan(m[2], &shift)
		}
		if got := n << shift; got != want {
			t.Errorf("forward.py's %s is %d; the server's end takes %d", name, got, want)
		}
	}
}

// TestRunnerChannelSurvivesReset: a program that resets its connection
// (RST: SO_LINGER 0) while the supervisor is not watching it (its window
// to pybox full) ends that stream, never the supervisor, when pybox's end
// of the stream arrives (EOF or data). On the old runner the shutdown of
// the reset socket raised ENOTCONN out of the supervisor's loop: PID 1
// died with status 1 mid-run and the program's later output was lost (a
// Kubernetes egress run, over HTTPS). It runs forward.py with this host's
// python3.
func TestRunnerChannelSurvivesReset(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 on this host")
	}
	probe := string(forwardPy) + `
import collections, socket, struct, select
sent, watched = [], {}
ls = socket.socket(); ls.bind(("127.0.0.1", 0)); ls.listen(8)
ch = Channel(ls, sent.append, lambda fd, h, m: watched.__setitem__(fd, h), lambda fd: watched.pop(fd))
for op in (OP_EOF, OP_DATA, OP_ACK):
    c = socket.create_connection(ls.getsockname())
    watched[ls.fileno()](ls.fileno())
    sid = ch.last
    s = ch.streams[sid]
    s.credit = 0; s.update()  # its window to pybox full: nobody watches it
    c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)); c.close()
    select.select([s.sock], [], [], 5)  # the reset has arrived
    body = struct.pack(">I", 10) if op == OP_ACK else (b"data" if op == OP_DATA else b"")
    ch.message(struct.pack(">BI", op, sid) + body)
    for fd, h in list(watched.items()):
        if fd != ls.fileno():
            h(fd)
    ch.message(struct.pack(">BI", OP_CLOSE, sid))
    ops = [m[0] for m in sent if struct.unpack(">I", m[1:5])[0] == sid]
    print(op, ops[0] == OP_OPEN, OP_CLOSE in ops, sid in ch.streams, ch.open)
`
	out, err := exec.Command(py, "-c", probe).CombinedOutput()
	want := fmt.Sprintf("%d True True False 0\n%d True True False 0\n%d True True False 0\n", 3, 2, 4)
	if err != nil || string(out) != want {
		t.Fatalf("the channel after a reset: %v\n%s\nwant:\n%s", err, out, want)
	}
}
