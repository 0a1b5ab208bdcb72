package lease

import (
	"bufio"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

func openDir(t *testing.T) *Dir {
	t.Helper()
	d, err := Open(filepath.Join(t.TempDir(), "owners"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func acquire(t *testing.T, d *Dir) *Lease {
	t.Helper()
	l, err := d.Acquire(NewID())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Release() }) // closes the file (Windows removes no folder with an open file); a second Release only fails
	return l
}

// TestLeaseLifecycle: a held lease cannot be taken; once released (owner
// gone, file kept) it can, once; once removed it is not there.
func TestLeaseLifecycle(t *testing.T) {
	d := openDir(t)
	l := acquire(t, d)
	if _, err := d.TryTake(l.ID()); !errors.Is(err, ErrHeld) {
		t.Fatalf("TryTake of a held lease: %v; want ErrHeld", err)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	taken, err := d.TryTake(l.ID())
	if err != nil {
		t.Fatalf("TryTake of a released lease: %v", err)
	}
	if _, err := d.TryTake(l.ID()); !errors.Is(err, ErrHeld) {
		t.Errorf("a second TryTake while the first holds it: %v; want ErrHeld", err)
	}
	if err := taken.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(l.Path()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("lease file after Remove: %v; want it gone", err)
	}
	if _, err := d.TryTake(l.ID()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("TryTake of a removed lease: %v; want fs.ErrNotExist", err)
	}
}

// TestLeaseDiesWithItsProcess: a lease held by another process cannot be
// taken while it runs and can once it is killed (SIGKILL: no clean-up ran).
func TestLeaseDiesWithItsProcess(t *testing.T) {
	d := openDir(t)
	id := NewID()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperHoldLease$")
	cmd.Env = append(os.Environ(), "LEASE_HELPER_DIR="+d.Path(), "LEASE_HELPER_ID="+id)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	if line, err := bufio.NewReader(stdout).ReadString('\n'); line != "held\n" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("helper said %q (%v); want held", line, err)
	}
	if _, err := d.TryTake(id); !errors.Is(err, ErrHeld) {
		t.Errorf("TryTake while the helper runs: %v; want ErrHeld", err)
	}
	cmd.Process.Kill()
	cmd.Wait() // "signal: killed", as meant
	l, err := d.TryTake(id)
	if err != nil {
		t.Fatalf("TryTake after the helper was killed: %v", err)
	}
	if err := l.Remove(); err != nil {
		t.Error(err)
	}
}

// TestHelperHoldLease is the helper process of TestLeaseDiesWithItsProcess:
// it takes a lease, says so and holds it until stdin closes.
func TestHelperHoldLease(t *testing.T) {
	dir, id := os.Getenv("LEASE_HELPER_DIR"), os.Getenv("LEASE_HELPER_ID")
	if dir == "" {
		t.Skip("helper process only")
	}
	d, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Acquire(id); err != nil {
		t.Fatal(err)
	}
	os.Stdout.WriteString("held\n")
	bufio.NewReader(os.Stdin).ReadString('\n')
}

// TestAcquireRecreatesARemovedFile: a reaper that takes the fresh file
// between create and lock, and removes it, does not leave the owner holding
// a lock on a file no path names: Acquire creates it again.
func TestAcquireRecreatesARemovedFile(t *testing.T) {
	d := openDir(t)
	reaped := 0
	d.afterCreate = func(id string) {
		if reaped > 0 {
			return
		}
		l, err := d.TryTake(id)
		if err != nil {
			t.Fatalf("reaper: %v", err)
		}
		reaped++
		if err := l.Remove(); err != nil {
			t.Fatalf("reaper: %v", err)
		}
	}
	l := acquire(t, d)
	if reaped != 1 {
		t.Fatalf("the reaper ran %d times; want 1", reaped)
	}
	if _, err := d.TryTake(l.ID()); !errors.Is(err, ErrHeld) {
		t.Errorf("TryTake after Acquire: %v; want ErrHeld (the path names the locked file)", err)
	}
}

// TestLockChecksThePath: a lock on a file its path no longer names (removed,
// or replaced by a new file) is not a lease.
func TestLockChecksThePath(t *testing.T) {
	skipOnWine(t, "Wine removes a file only when its last handle closes and keeps its name until then; "+
		"Windows unlinks it at once (POSIX semantics, 1809 and later) or marks it delete-pending, which lock sees")
	for _, replace := range []bool{false, true} {
		d := openDir(t)
		id := NewID()
		path := d.File(id)
		if err := os.WriteFile(path, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		f, err := d.root.OpenFile(fileName(id), os.O_RDONLY, 0) // on Windows too, the name can then be removed
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		if replace {
			if err := os.WriteFile(path, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := d.lock(f, id, false); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("replaced=%v: lock of an unlinked file: %v; want fs.ErrNotExist", replace, err)
		}
	}
}

// TestTryTakeRefuses: only a regular lease file with a valid id is taken;
// a symlink or a FIFO in its place is not (and does not block).
func TestTryTakeRefuses(t *testing.T) {
	d := openDir(t)
	target := acquire(t, d)
	if err := target.Release(); err != nil {
		t.Fatal(err)
	}
	link, fifo := NewID(), NewID()
	if err := os.Symlink(fileName(target.ID()), d.File(link)); err != nil {
		t.Fatal(err)
	}
	mkfifo(t, d.File(fifo))
	for _, id := range []string{link, fifo, "../" + target.ID(), "", "ABC"} {
		if l, err := d.TryTake(id); err == nil {
			l.Release()
			t.Errorf("TryTake(%q) took it; want refused", id)
		}
	}
	if _, err := d.Acquire(target.ID()); !errors.Is(err, fs.ErrExist) {
		t.Errorf("Acquire of an existing id: %v; want fs.ErrExist", err)
	}
}

// TestIDs lists lease files only.
func TestIDs(t *testing.T) {
	d := openDir(t)
	l := acquire(t, d)
	for _, name := range []string{"notes.txt", "xyz.lock", l.ID() + ".tmp"} {
		if err := os.WriteFile(filepath.Join(d.Path(), name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ids, err := d.IDs()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids, []string{l.ID()}) {
		t.Errorf("IDs = %v; want [%s]", ids, l.ID())
	}
}

// TestOpenResolvesSymlinks: two spellings of one folder give one path, the
// value containers are labelled with.
func TestOpenResolvesSymlinks(t *testing.T) {
	skipOnWine(t, "Wine's symbolic links are not reparse points, which filepath.EvalSymlinks resolves on Windows")
	real := filepath.Join(t.TempDir(), "owners")
	link := filepath.Join(t.TempDir(), "link")
	a, err := Open(real)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	b, err := Open(link)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if a.Path() != b.Path() {
		t.Errorf("paths %q and %q; want one", a.Path(), b.Path())
	}
	if fi, err := os.Stat(real); modeChecked && (err != nil || fi.Mode().Perm() != 0o700) {
		t.Errorf("folder mode %v (%v); want 0700", fi.Mode().Perm(), err)
	}
}
