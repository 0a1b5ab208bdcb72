//go:build !windows

package sandbox_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pybox-dev/pybox/sandbox"
)

// TestChargeBoundsTheCopyBack: what a copy-back takes is bounded by the
// room the workspace's quota leaves (bytes and entries), and by the disk
// reserve; a refusal counts nothing.
func TestChargeBoundsTheCopyBack(t *testing.T) {
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "held"), make([]byte, 10<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	sb, _ := newSandbox(t, sandbox.Config{WarmPool: -1, Limits: sandbox.Limits{WorkspaceBytes: 16 << 20, WorkspaceFiles: 100, DiskReserve: -1}})
	c := sb.Charge(ws)
	defer c.Close()
	if err := c.Take(4<<20, 1); err != nil {
		t.Fatalf("4 MiB into 6 MiB of room: %v", err)
	}
	if err := c.Take(4<<20, 1); !errors.Is(err, sandbox.ErrQuota) {
		t.Fatalf("4 MiB more into 2 MiB of room: %v; want ErrQuota", err)
	}
	if err := c.Take(1<<20, 1); err != nil {
		t.Fatalf("1 MiB into 2 MiB of room (the refusal counted nothing): %v", err)
	}
	if err := c.Take(0, 98); !errors.Is(err, sandbox.ErrQuota) {
		t.Fatalf("entries past the quota: %v; want ErrQuota", err)
	}
}

// TestChargeKeepsTheDiskReserve: a copy-back never takes the disk below
// the reserve, whatever the quota.
func TestChargeKeepsTheDiskReserve(t *testing.T) {
	ws := t.TempDir()
	var st syscall.Statfs_t
	if err := syscall.Statfs(ws, &st); err != nil {
		t.Fatal(err)
	}
	free := int64(st.Bavail) * int64(st.Bsize) // Bsize is uint32 on darwin
	// Half the free space is reserved: taking all of it passes the
	// reserve by far, taking 1 KiB not, however much other processes
	// write meanwhile (within reason).
	sb, _ := newSandbox(t, sandbox.Config{WarmPool: -1, Limits: sandbox.Limits{WorkspaceBytes: 1 << 62, DiskReserve: free / 2}})
	c := sb.Charge(ws)
	defer c.Close()
	if err := c.Take(free, 1); !errors.Is(err, sandbox.ErrQuota) || !strings.Contains(err.Error(), "free") {
		t.Fatalf("the whole free space: %v; want ErrQuota for the reserve", err)
	}
	if err := c.Take(1<<10, 1); err != nil {
		t.Fatalf("1 KiB: %v", err)
	}
}

// TestChargeOneAtATime: a second copy-back into a Sandbox's workspaces
// waits for the first to end, so two cannot take the same room.
func TestChargeOneAtATime(t *testing.T) {
	sb, _ := newSandbox(t, sandbox.Config{WarmPool: -1})
	first := sb.Charge(t.TempDir())
	got := make(chan *sandbox.Charge)
	go func() { got <- sb.Charge(t.TempDir()) }()
	select {
	case c := <-got:
		c.Close()
		t.Fatal("a second Charge opened while the first was open")
	case <-time.After(200 * time.Millisecond): // an absence: nothing to wait for
	}
	first.Close()
	first.Close() // idempotent
	select {
	case c := <-got:
		c.Close()
	case <-time.After(10 * time.Second):
		t.Fatal("the second Charge did not open once the first closed")
	}
}
