package bench

import (
	"testing"
	"time"
)

// TestHostCPUCounts: CPU this process burns shows in the host's busy time
// and in the client's.
func TestHostCPUCounts(t *testing.T) {
	busy0, _, ok0 := hostCPU()
	client0 := clientCPU()
	for start := time.Now(); time.Since(start) < 300*time.Millisecond; { // a busy loop: CPU time, not sleep
	}
	busy1, load, ok1 := hostCPU()
	client1 := clientCPU()
	if !ok0 || !ok1 || load < 0 {
		t.Fatalf("hostCPU: ok %v %v, load %v", ok0, ok1, load)
	}
	if busy1-busy0 < 0.1 || client1-client0 < 0.1 {
		t.Errorf("after 0.3 s of busy loop: host busy +%.2f s, client +%.2f s; want at least 0.1 s each", busy1-busy0, client1-client0)
	}
}
