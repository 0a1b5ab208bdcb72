package bench

import (
	"testing"
)

// TestHostCPUCounts: CPU this process burns shows in the client's CPU time
// and in the host's busy time.
func TestHostCPUCounts(t *testing.T) {
	busy0, _, ok0 := hostCPU()
	client0 := clientCPU()
	for clientCPU()-client0 < 0.2 { // a busy loop until it has had 0.2 s of CPU, however loaded the host
	}
	busy1, load, ok1 := hostCPU()
	if !ok0 || !ok1 || load < 0 {
		t.Fatalf("hostCPU: ok %v %v, load %v", ok0, ok1, load)
	}
	if busy1-busy0 < 0.15 {
		t.Errorf("after 0.2 s of this process's CPU the host was busy +%.2f s; want at least 0.15 s", busy1-busy0)
	}
}
