package sandbox_test

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/docker/docker/api/types/container"

	"github.com/pybox-dev/pybox/internal/engine"
	"github.com/pybox-dev/pybox/internal/lease"
	"github.com/pybox-dev/pybox/internal/testenv"
	"github.com/pybox-dev/pybox/sandbox"
)

// TestReapSparesLiveOwnerWithSamePID: two live servers whose pids coincide
// (each is pid 1 of its own PID namespace, or both run in this process)
// and whose hostnames match: one reaping never removes the other's
// containers. The other's session survives with its state.
func TestReapSparesLiveOwnerWithSamePID(t *testing.T) {
	dir := t.TempDir()
	other, eng := newSandbox(t, sandbox.Config{WarmPool: -1, LeaseDir: dir})
	if res := run(t, other, "live", "x = 7"); res.ExitCode != 0 {
		t.Fatalf("session start: exit %d stderr %q", res.ExitCode, res.Stderr)
	}
	before := owned(t, eng, other)
	reaper, _ := newSandbox(t, sandbox.Config{WarmPool: -1, LeaseDir: dir})
	n, err := reaper.ReapOrphans(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if left := owned(t, eng, other); len(left) != len(before) || n != 0 {
		t.Errorf("reaped %d; the live owner's containers went from %d to %d", n, len(before), len(left))
	}
	if res := run(t, other, "live", "print(x)"); res.Stdout != "7\n" || res.SessionLost || res.NewSession {
		t.Errorf("live session after the reap: stdout %q lost=%v new=%v; want 7 in the same session", res.Stdout, res.SessionLost, res.NewSession)
	}
}

// TestReapOnlyGoneOwners: ReapOrphans removes the containers (and the lease
// file) of an owner whose lease in its own folder is unlocked, and nothing
// else: no lease label, a lease in another folder, a missing lease file, a
// held lease, its own containers.
func TestReapOnlyGoneOwners(t *testing.T) {
	dir, runs := t.TempDir(), t.TempDir()
	reaper, eng := newSandbox(t, sandbox.Config{WarmPool: -1, LeaseDir: dir, RunsDir: runs})
	leases := openLeases(t, dir)
	elsewhere := openLeases(t, t.TempDir())
	gone, goneAlone := released(t, leases), released(t, leases)
	held, err := leases.Acquire(lease.NewID())
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release()
	away := released(t, elsewhere)
	missing := lease.NewID()
	ids := map[string]string{
		"gone":     createOwned(t, eng, gone.ID(), gone.Path()),
		"no lease": createOwned(t, eng, lease.NewID(), ""),
		"away":     createOwned(t, eng, away.ID(), away.Path()),
		"missing":  createOwned(t, eng, missing, leases.File(missing)),
		"held":     createOwned(t, eng, held.ID(), held.Path()),
		"own":      createLabelled(t, eng, reaper.Owner().Labels("run")),
	}
	for _, owner := range []string{gone.ID(), held.ID()} { // their run output folders
		if err := os.MkdirAll(filepath.Join(runs, owner, "r1"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	n, err := reaper.ReapOrphans(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for owner, want := range map[string]bool{gone.ID(): false, held.ID(): true} {
		if _, err := os.Stat(filepath.Join(runs, owner)); (err == nil) != want {
			t.Errorf("run output folders of owner %s: stat %v; want kept %v", owner, err, want)
		}
	}
	for name, id := range ids {
		if got, want := exists(t, eng, id), name != "gone"; got != want {
			t.Errorf("%s: container exists=%v; want %v", name, got, want)
		}
	}
	if n != 1 {
		t.Errorf("reaped %d; want 1", n)
	}
	for _, l := range []*lease.Lease{gone, goneAlone, held, away} {
		if _, err := os.Lstat(l.Path()); errors.Is(err, fs.ErrNotExist) != (l == gone || l == goneAlone) {
			t.Errorf("lease %s: stat %v; want only the gone owners' removed", l.Path(), err)
		}
	}
}

// TestCloseEndsTheLease: a sandbox's containers name its lease, which it
// holds until Close and then removes. Close removes every container that
// names it, also one it has no id for (created behind its back here, as
// the daemon creates one whose create's answer was lost), then the lease;
// when the daemon is away at Close, the lease file stays unlocked and the
// next reaper removes both.
func TestCloseEndsTheLease(t *testing.T) {
	for _, leftover := range []string{"none", "unknown to the sandbox", "the daemon away at Close"} {
		t.Run(leftover, func(t *testing.T) {
			eng := testenv.Docker(t)
			sbEng := eng
			var px *testenv.DaemonProxy
			if leftover == "the daemon away at Close" {
				px = testenv.NewDaemonProxy(t)
				t.Setenv("DOCKER_HOST", px.Host)
				var err error
				if sbEng, err = engine.New(slog.New(slog.DiscardHandler)); err != nil {
					t.Fatal(err)
				}
			}
			dir := t.TempDir()
			sb, err := sandbox.New(sandbox.Config{Engine: sbEng, Image: testenv.RuntimeImage(t, eng, "base"), WarmPool: -1, LeaseDir: dir})
			if err != nil {
				t.Fatal(err)
			}
			o := sb.Owner()
			if want := filepath.Join(openLeases(t, dir).Path(), o.ID+".lock"); o.Lease != want || o.Labels("run")[sandbox.LabelLease] != want {
				t.Fatalf("lease %q, label %q; want %q", o.Lease, o.Labels("run")[sandbox.LabelLease], want)
			}
			if _, err := openLeases(t, dir).TryTake(o.ID); !errors.Is(err, lease.ErrHeld) {
				t.Errorf("lease of a live sandbox: %v; want held", err)
			}
			var id string
			if leftover != "none" {
				id = createLabelled(t, eng, o.Labels("run"))
			}
			if px != nil {
				px.Stop()
			}
			sb.Close()
			_, err = os.Lstat(o.Lease)
			if kept := px != nil; errors.Is(err, fs.ErrNotExist) == kept {
				t.Errorf("lease file after Close: %v; want it kept: %v", err, kept)
			}
			if id != "" && px == nil && exists(t, eng, id) {
				t.Errorf("the container naming the lease is still there after Close")
			}
			if px == nil {
				return
			}
			px.Start() // the daemon back (DOCKER_HOST still names the proxy)
			reaper, _ := newSandbox(t, sandbox.Config{WarmPool: -1, LeaseDir: dir})
			if n, err := reaper.ReapOrphans(t.Context()); n != 1 || err != nil || exists(t, eng, id) {
				t.Errorf("reap after Close with the daemon away: %d, %v, container exists=%v; want it removed", n, err, exists(t, eng, id))
			}
			if _, err := os.Lstat(o.Lease); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("lease file after the reap: %v; want it gone", err)
			}
		})
	}
}

// TestNoLeaseDirReapsNothing: without a lease dir a sandbox labels an
// empty lease (set, so that none inherited from an image stands:
// contract.InstanceLabels) and removes nothing, not even a gone owner's
// containers.
func TestNoLeaseDirReapsNothing(t *testing.T) {
	dir := t.TempDir()
	gone := released(t, openLeases(t, dir))
	reaper, eng := newSandbox(t, sandbox.Config{WarmPool: -1})
	id := createOwned(t, eng, gone.ID(), gone.Path())
	if l, ok := reaper.Owner().Labels("run")[sandbox.LabelLease]; !ok || l != "" {
		t.Errorf("labels %v; want an empty lease label", reaper.Owner().Labels("run"))
	}
	if n, err := reaper.ReapOrphans(t.Context()); n != 0 || err != nil || !exists(t, eng, id) {
		t.Errorf("reaped %d (%v), container exists=%v; want nothing removed", n, err, exists(t, eng, id))
	}
}

func openLeases(t *testing.T, dir string) *lease.Dir {
	t.Helper()
	d, err := lease.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// released is the lease of an owner that died: its file is there, unlocked.
func released(t *testing.T, d *lease.Dir) *lease.Lease {
	t.Helper()
	l, err := d.Acquire(lease.NewID())
	if err == nil {
		err = l.Release()
	}
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// createOwned creates a container labelled as owner's, with the lease
// label leasePath ("" = none). Its host label is unique and its pid dead,
// so only the lease decides (pid-based reapers elsewhere skip other hosts).
func createOwned(t *testing.T, eng *engine.Client, owner, leasePath string) string {
	t.Helper()
	labels := map[string]string{sandbox.LabelManaged: "true", sandbox.LabelOwner: owner,
		sandbox.LabelHost: "elsewhere-" + owner, sandbox.LabelPID: "999999999", sandbox.LabelRole: "run"}
	if leasePath != "" {
		labels[sandbox.LabelLease] = leasePath
	}
	return createLabelled(t, eng, labels)
}

// createLabelled creates (does not start) a container with labels; it is
// removed at cleanup if still there.
func createLabelled(t *testing.T, eng *engine.Client, labels map[string]string) string {
	t.Helper()
	id, err := eng.Create(context.Background(), engine.Spec{
		Config: &container.Config{Image: testenv.RuntimeImage(t, eng, "base"), Cmd: []string{"true"}, Labels: labels, NetworkDisabled: true},
		Host:   &container.HostConfig{NetworkMode: "none"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Remove(context.Background(), id) })
	return id
}

// exists reports whether container id is still there.
func exists(t *testing.T, eng *engine.Client, id string) bool {
	t.Helper()
	return slices.ContainsFunc(testenv.Managed(t, eng, nil), func(c engine.Summary) bool { return c.ID == id })
}
