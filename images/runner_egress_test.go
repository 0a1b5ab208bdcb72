package images

import (
	"fmt"
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
