package sandbox_test

import (
	"os"
	"strconv"
	"testing"

	"github.com/pybox-dev/pybox/internal/contract"
	"github.com/pybox-dev/pybox/sandbox"
)

// TestFakeUIDTakenDrawsAgain: a container that finds another with its uid
// on the daemon (another server drew the same one) is removed before any
// program reaches it and the start draws another uid; after three draws
// that all collide the run fails, and nothing is left.
func TestFakeUIDTakenDrawsAgain(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("uids of their own need a server that runs as root")
	}
	for _, tt := range []struct {
		taken int
		ok    bool
	}{{0, true}, {2, true}, {3, false}} {
		f := newFake()
		f.takenUIDs = tt.taken
		sb := fakeSandbox(t, f, sandbox.Config{WarmPool: -1})
		res, err := runCode(t.Context(), sb, "x")
		sb.Close()
		if tt.ok && (err != nil || res.Stdout != "ran: x\n") {
			t.Errorf("%d taken: %+v, %v; want the run to succeed", tt.taken, res, err)
		}
		if !tt.ok && (err == nil || res.Stdout != "") {
			t.Errorf("%d taken: %+v, %v; want an error and no run", tt.taken, res, err)
		}
		live, started := f.counts()
		if want := min(tt.taken+1, 3); live != 0 || started != want {
			t.Errorf("%d taken: %d started, %d left; want %d started, none left", tt.taken, started, live, want)
		}
		checkDistinctUIDs(t, f.uids)
	}
}

// checkDistinctUIDs checks that each uid is different and in pybox's range.
func checkDistinctUIDs(t *testing.T, uids []string) {
	t.Helper()
	seen := map[string]bool{}
	for _, u := range uids {
		n, err := strconv.Atoi(u)
		if err != nil || n < contract.SandboxUIDBase || n >= contract.SandboxUIDBase+contract.SandboxUIDCount || seen[u] {
			t.Errorf("uids %v: want distinct uids from pybox's range", uids)
			return
		}
		seen[u] = true
	}
}

// anyUIDFake is a fakeBackend whose containers may run as any uid, as
// pods do (Kubernetes).
type anyUIDFake struct{ *fakeBackend }

func (anyUIDFake) AnyUID() bool { return true }

// TestFakeAnyUIDBackendOwnUIDs: on a backend whose containers may run as
// any uid (Kubernetes), each container runs as a uid of its own whatever
// the server's uid and user (RLIMIT_NPROC counts a uid's processes across
// a node: pods sharing a uid share one process budget), in the user's
// group; SharedUID still makes them share it.
func TestFakeAnyUIDBackendOwnUIDs(t *testing.T) {
	for _, shared := range []bool{false, true} {
		f := newFake()
		sb, err := sandbox.New(sandbox.Config{Backend: anyUIDFake{f}, User: "1000:1000", WarmPool: -1, SharedUID: shared})
		if err != nil {
			t.Fatal(err)
		}
		for _, code := range []string{"a", "b", "c"} {
			if _, err := runCode(t.Context(), sb, code); err != nil {
				t.Fatal(err)
			}
		}
		sb.Close()
		if sb.OwnUIDs() == shared {
			t.Errorf("shared %v: OwnUIDs %v", shared, sb.OwnUIDs())
		}
		if shared {
			if f.uids[0] != "" || f.users[0] != "1000:1000" {
				t.Errorf("shared: uid labels %q, users %q; want none and 1000:1000", f.uids, f.users)
			}
			continue
		}
		checkDistinctUIDs(t, f.uids)
		for i, u := range f.users {
			if u != f.uids[i]+":1000" {
				t.Errorf("users %q, uid labels %q: want each its own uid in group 1000", f.users, f.uids)
				break
			}
		}
	}
}
