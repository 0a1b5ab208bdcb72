//go:build linux

package testenv

import (
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// TestStartListeningRetriesATakenPort: a node's server whose port was
// taken between the draw and its bind (it exits: "address already in
// use") is started again on other ports, and the start returns once it
// accepts connections. CI once lost every Kubernetes test of a package to
// a kubelet that could not bind its port.
func TestStartListeningRetriesATakenPort(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 on this host")
	}
	n := &Node{dir: t.TempDir()}
	var drawn []int
	err = n.startListening(py, "server.log", 1, func(ports []int) ([]string, error) {
		drawn = append(drawn, ports[0])
		if len(drawn) == 1 {
			return []string{"-c", "import sys; print('listen tcp: bind: address already in use'); sys.exit(1)"}, nil
		}
		return []string{"-m", "http.server", "--bind", "127.0.0.1", strconv.Itoa(ports[0])}, nil
	})
	defer stopProcs(n.procs)
	if err != nil || len(drawn) != 2 || drawn[0] == drawn[1] || len(n.procs) != 1 {
		t.Fatalf("start: %v after %d draws %v, %d processes kept; want a second start on another port, one process", err, len(drawn), drawn, len(n.procs))
	}
	c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(drawn[1])))
	if err != nil {
		t.Fatalf("the second start does not listen: %v", err)
	}
	c.Close()
	err = n.startListening(py, "fails.log", 1, func([]int) ([]string, error) {
		return []string{"-c", "print('some other failure')"}, nil
	})
	if want := "did not listen"; err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "some other failure") {
		t.Errorf("a server that exits for another reason: %v; want %q with its log, at once", err, want)
	}
}
