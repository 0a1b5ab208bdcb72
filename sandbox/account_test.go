package sandbox

import (
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pybox-dev/pybox/internal/storage"
)

func testAccount(t *testing.T, dirs ...string) *Account {
	t.Helper()
	a := newAccount(Limits{WorkspaceBytes: 10 << 20, WorkspaceFiles: 100, DiskReserve: -1}.WithDefaults(), slog.New(slog.DiscardHandler), nil, dirs...)
	t.Cleanup(a.close)
	return a
}

func fill(t *testing.T, path string, size int) {
	t.Helper()
	if err := os.WriteFile(path, make([]byte, size), 0o600); err != nil {
		t.Fatal(err)
	}
}

// Reservations count with what the folders hold: a copy that would pass
// the quota is refused before anything is written, and a released one is
// charged until measured.
func TestAccountReserve(t *testing.T) {
	dir := t.TempDir()
	fill(t, filepath.Join(dir, "a"), 4<<20)
	a := testAccount(t, dir)
	release, err := a.Reserve(storage.Usage{Bytes: 5 << 20, Files: 1})
	if err != nil {
		t.Fatalf("reserve 5 MiB beside 4 MiB of a 10 MiB quota: %v", err)
	}
	if _, err := a.Reserve(storage.Usage{Bytes: 2 << 20, Files: 1}); !errors.Is(err, ErrQuota) {
		t.Fatalf("a second reservation past the quota: %v; want ErrQuota", err)
	}
	fill(t, filepath.Join(dir, "copy"), 5<<20) // what the reservation was for: the copy, written
	release()
	release() // idempotent
	if got := a.Usage().Bytes; got < 9<<20 {
		t.Fatalf("after release the account holds %d bytes; want the copy charged (9 MiB)", got)
	}
	if err := a.room(dir, 2<<20); !errors.Is(err, ErrQuota) {
		t.Fatalf("room for 2 MiB more: %v; want ErrQuota", err)
	}
}

// Programs running at once on folders of the same owner are bounded
// together: when their total passes the quota every one is stopped.
func TestAccountStopsEveryWatcherTogether(t *testing.T) {
	code, runs := t.TempDir(), t.TempDir()
	a := testAccount(t, code, runs)
	if _, err := a.admit(code); err != nil {
		t.Fatal(err)
	}
	stopped := make(chan error, 2)
	for range 2 {
		stop := a.watch(func(err error) { stopped <- err })
		t.Cleanup(stop)
	}
	fill(t, filepath.Join(code, "one"), 6<<20) // each within the quota alone
	fill(t, filepath.Join(runs, "two"), 6<<20)
	for range 2 {
		select {
		case err := <-stopped:
			if !errors.Is(err, ErrQuota) {
				t.Fatalf("stopped with %v; want ErrQuota", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("12 MiB in two folders of a 10 MiB owner: the watchers were not stopped")
		}
	}
}

// A run's output folder, counted in the runs folder, is not counted a
// second time where it is mounted in the workspace.
func TestAccountSkipsOutputMountpoints(t *testing.T) {
	code := t.TempDir()
	mnt := filepath.Join(code, "outputs", "run1")
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	fill(t, filepath.Join(mnt, "seen-twice"), 6<<20)
	a := testAccount(t, code)
	done := a.skipMount(mnt)
	defer done()
	if err := a.measure(); err != nil {
		t.Fatal(err)
	}
	if got := a.Usage(); got.Bytes != 0 || got.Files != 2 {
		t.Fatalf("measured %+v; want the two folders only", got)
	}
}

// A folder the server can neither read nor make readable (another user's)
// counts as over the quota: a program is not started on it and the file
// tools add nothing (the old walk skipped it silently). Run as uid 65534
// when the tests run as root.
func TestAccountRefusesAFolderItCannotRead(t *testing.T) {
	dir := os.Getenv("PYBOX_TEST_DIR")
	if os.Getenv("PYBOX_TEST_CHILD") == "" {
		if os.Geteuid() != 0 {
			t.Skip("needs root to make a folder of another user")
		}
		setpriv, err := exec.LookPath("setpriv")
		if err != nil {
			t.Skip("no setpriv")
		}
		dir, err = os.MkdirTemp("", "pybox-account-")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		locked := filepath.Join(dir, "locked")
		if err := os.Mkdir(locked, 0o700); err != nil { // root's
			t.Fatal(err)
		}
		fill(t, filepath.Join(locked, "big"), 64<<20)
		if err := os.Chown(dir, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(setpriv, "--reuid", "65534", "--regid", "65534", "--clear-groups",
			os.Args[0], "-test.run", "^"+t.Name()+"$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), "PYBOX_TEST_CHILD=1", "PYBOX_TEST_DIR="+dir)
		out, err := cmd.CombinedOutput()
		t.Logf("as uid 65534:\n%s", out)
		if err != nil {
			t.Fatalf("the check failed as uid 65534: %v", err)
		}
		return
	}
	a := testAccount(t, dir)
	if _, err := a.admit(dir); !errors.Is(err, ErrQuota) || !strings.Contains(err.Error(), "cannot read") {
		t.Fatalf("admit a program on a folder holding 64 MiB the server cannot read: %v; want ErrQuota", err)
	}
	if err := a.room(dir, 1); !errors.Is(err, ErrQuota) {
		t.Fatalf("room for 1 byte: %v; want ErrQuota", err)
	}
}

// pausedFS is a Filesystem whose next Usage, once armed, waits until
// released: a measurement held in the middle, as a loaded machine holds
// one.
type pausedFS struct {
	armed   chan struct{} // a token: the next Usage pauses
	entered chan struct{}
	release chan struct{}
}

func (f *pausedFS) Usage() (storage.Usage, error) {
	select {
	case <-f.armed:
		f.entered <- struct{}{}
		<-f.release
	default:
	}
	return storage.Usage{}, nil
}

func (f *pausedFS) HostDir() string { return "" }

// A run's output folder handed over (to be copied back) while a
// measurement that began before, and so counted it, is under way: the
// copy-back does not judge by that figure. (Under load the old account
// recorded it after the hand-over and trusted it: a run that left more
// than the quota in its folder had even its small files refused, "the
// first call listed no saved file" of TestOutputsCopyBackStaysWithinTheQuota.)
func TestAccountHandOverDuringAMeasurement(t *testing.T) {
	storageDir, runs := t.TempDir(), t.TempDir()
	o := &Outputs{Dir: filepath.Join(runs, "run1")}
	if err := os.Mkdir(o.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	fill(t, filepath.Join(o.Dir, "big"), 12<<20) // over the 10 MiB quota
	fs := &pausedFS{armed: make(chan struct{}, 1), entered: make(chan struct{}), release: make(chan struct{})}
	a := newAccount(Limits{WorkspaceBytes: 10 << 20, WorkspaceFiles: 100, DiskReserve: -1}.WithDefaults(), slog.New(slog.DiscardHandler), fs, storageDir)
	t.Cleanup(a.close)
	defer a.cover(runs)() // walked beside the filesystem: a folder outside it
	fs.armed <- struct{}{}
	measured := make(chan error, 1)
	go func() { measured <- a.measure() }()
	<-fs.entered // the measurement is under way; it has not looked at the runs yet
	a.handOver(o)
	defer o.Remove()
	close(fs.release)
	if err := <-measured; err != nil {
		t.Fatal(err)
	}
	// What Charge.Take does for the copy-back's first file.
	if err := a.refresh(); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Reserve(storage.Usage{Bytes: 1 << 10, Files: 1}); err != nil {
		t.Errorf("a 1 KiB copy into an empty workspace, its run's folder handed over: %v (the account holds %+v)", err, a.Usage())
	}
}

// A run's output folder handed over during each of the three walks a
// measurement makes at most: the last walk's figure (which counted the
// folder handed over beside it) is recorded, but not trusted: the
// copy-back's next refresh measures again.
func TestAccountHandOverDuringEveryWalk(t *testing.T) {
	storageDir, runs := t.TempDir(), t.TempDir()
	var outs []*Outputs
	for i := range 3 {
		o := &Outputs{Dir: filepath.Join(runs, "run"+strconv.Itoa(i))}
		if err := os.Mkdir(o.Dir, 0o755); err != nil {
			t.Fatal(err)
		}
		fill(t, filepath.Join(o.Dir, "big"), 11<<20) // over the 10 MiB quota
		outs = append(outs, o)
	}
	fs := &pausedFS{armed: make(chan struct{}, 3), entered: make(chan struct{}), release: make(chan struct{})}
	a := newAccount(Limits{WorkspaceBytes: 10 << 20, WorkspaceFiles: 100, DiskReserve: -1}.WithDefaults(), slog.New(slog.DiscardHandler), fs, storageDir)
	t.Cleanup(a.close)
	defer a.cover(runs)()
	for range 3 {
		fs.armed <- struct{}{}
	}
	measured := make(chan error, 1)
	go func() { measured <- a.measure() }()
	for _, o := range outs {
		<-fs.entered // a walk is under way; it has not looked at the runs yet
		a.handOver(o)
		defer o.Remove()
		fs.release <- struct{}{}
	}
	if err := <-measured; err != nil {
		t.Fatal(err)
	}
	if err := a.refresh(); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Reserve(storage.Usage{Bytes: 1 << 10, Files: 1}); err != nil {
		t.Errorf("a 1 KiB copy into an empty workspace, every run's folder handed over: %v (the account holds %+v)", err, a.Usage())
	}
}
