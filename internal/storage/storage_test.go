package storage_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pybox-dev/pybox/internal/storage"
)

// open returns a fresh code-storage Dir in a temp directory.
func open(t *testing.T) *storage.Dir {
	t.Helper()
	d, err := storage.Open(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// put writes a file directly on the host, bypassing the package.
func put(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func slurp(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// noTemps fails when a temp file of an atomic write is left under root.
func noTemps(t *testing.T, root string) {
	t.Helper()
	filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(e.Name(), ".pybox-tmp-") {
			t.Errorf("temp file left behind: %s", p)
		}
		return nil
	})
}

// within runs f and fails the test if it has not returned after 5 s (a
// blocking open of a FIFO would hang forever).
func within(t *testing.T, what string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(5 * time.Second):
		t.Fatalf("%s did not return within 5s (blocked on a special file?)", what)
		return nil
	}
}

func TestStorageRel(t *testing.T) {
	d := open(t)
	elsewhere := t.TempDir()
	tests := []struct {
		in      string
		want    string
		wantErr error
	}{
		{"a.py", "a.py", nil},
		{"sub/./a.py", "sub/a.py", nil},
		{"sub/../a.py", "a.py", nil},
		{d.Path() + "/a.py", "a.py", nil},
		{d.Path() + "/sub/../a.py", "a.py", nil},
		{"../a.py", "", storage.ErrOutside},
		{"sub/../../a.py", "", storage.ErrOutside},
		{"../../etc/passwd", "", storage.ErrOutside},
		{"/etc/passwd", "", storage.ErrOutside},
		{elsewhere + "/a.py", "", storage.ErrOutside},
		{d.Path() + "/../a.py", "", storage.ErrOutside},
		{d.Path() + "-sibling/a.py", "", storage.ErrOutside},
		{"", "", storage.ErrBadName},
		{"  ", "", storage.ErrBadName},
		{"a\x00.py", "", storage.ErrBadName},
	}
	for _, tt := range tests {
		got, err := d.Rel(tt.in)
		if got != filepath.FromSlash(tt.want) || !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
			t.Errorf("Rel(%q) = %q, %v; want %q, %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestStorageCreateWriteRead(t *testing.T) {
	d := open(t)
	if err := d.Create("sub/a.py", []byte("print(1)\n")); err != nil {
		t.Fatalf("Create: %v", err)
	}
	if got := slurp(t, filepath.Join(d.Path(), "sub/a.py")); got != "print(1)\n" {
		t.Errorf("after Create the host file holds %q", got)
	}
	if err := d.Create("sub/a.py", []byte("other")); !errors.Is(err, fs.ErrExist) {
		t.Errorf("second Create: %v, want fs.ErrExist", err)
	}
	if err := d.Write("sub/a.py", []byte("print(2)\n")); err != nil {
		t.Fatalf("Write: %v", err)
	}
	tests := []struct {
		limit   int64
		want    string
		wantCut bool
	}{
		{1 << 20, "print(2)\n", false},
		{9, "print(2)\n", false},
		{5, "print", true},
		{0, "", true},
	}
	for _, tt := range tests {
		got, cut, err := d.Read("sub/a.py", tt.limit)
		if string(got) != tt.want || cut != tt.wantCut || err != nil {
			t.Errorf("Read(limit %d) = %q, %v, %v; want %q, %v, nil", tt.limit, got, cut, err, tt.want, tt.wantCut)
		}
	}
	if _, _, err := d.Read("missing.py", 10); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("Read of a missing file: %v, want ErrNotFound", err)
	}
	noTemps(t, d.Path())
}

func TestStorageAppend(t *testing.T) {
	d := open(t)
	if err := d.Create("a.py", []byte("x = 1\n")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		content  string
		max      int64
		wantSize int64
		wantErr  error
		want     string // the file afterwards
	}{
		{"append", "x += 1\n", 100, 13, nil, "x = 1\nx += 1\n"},
		{"empty", "", 100, 13, nil, "x = 1\nx += 1\n"},
		{"exactly the cap", "#2345678\n", 22, 22, nil, "x = 1\nx += 1\n#2345678\n"},
		{"one byte past the cap", "y", 22, 0, storage.ErrTooLarge, "x = 1\nx += 1\n#2345678\n"},
		{"content alone past the cap", strings.Repeat("y", 30), 22, 0, storage.ErrTooLarge, "x = 1\nx += 1\n#2345678\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := d.Append("a.py", []byte(tt.content), tt.max)
			if got != tt.wantSize || !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
				t.Errorf("Append = %d, %v; want %d, %v", got, err, tt.wantSize, tt.wantErr)
			}
			if file := slurp(t, filepath.Join(d.Path(), "a.py")); file != tt.want {
				t.Errorf("file holds %q, want %q", file, tt.want)
			}
			noTemps(t, d.Path())
		})
	}
	if _, err := d.Append("missing.py", []byte("x"), 100); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("Append to a missing file: %v, want ErrNotFound", err)
	}
	if _, err := os.Lstat(filepath.Join(d.Path(), "missing.py")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Append created the missing file: %v", err)
	}
}

// TestStorageAppendKeepsMode: permission bits survive the rewrite, set-id
// bits do not, and as root the owner (the sandbox user) is kept.
func TestStorageAppendKeepsMode(t *testing.T) {
	d := open(t)
	path := filepath.Join(d.Path(), "a.py")
	put(t, path, "a\n")
	if err := os.Chmod(path, 0o750|fs.ModeSetuid|fs.ModeSetgid); err != nil {
		t.Fatal(err)
	}
	root := os.Geteuid() == 0
	if root {
		if err := os.Chown(path, 10001, 10002); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := d.Append("a.py", []byte("b\n"), 100); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fi.Mode(), fs.FileMode(0o750); got != want && modeBits {
		t.Errorf("mode after Append = %v, want %v", got, want)
	}
	if uid, gid, ok := fileOwner(fi); root && ok && (uid != 10001 || gid != 10002) {
		t.Errorf("owner after Append = %d:%d, want 10001:10002", uid, gid)
	}
}

// TestStorageAppendConcurrent: concurrent appends to one file lose nothing.
func TestStorageAppendConcurrent(t *testing.T) {
	d := open(t)
	if err := d.Create("a.py", nil); err != nil {
		t.Fatal(err)
	}
	const writers, each = 16, 20
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				if _, err := d.Append("a.py", fmt.Appendf(nil, "w%d-%d\n", w, i), 1<<20); err != nil {
					t.Errorf("Append: %v", err)
				}
			}
		})
	}
	wg.Wait()
	got := slurp(t, filepath.Join(d.Path(), "a.py"))
	if n := strings.Count(got, "\n"); n != writers*each {
		t.Errorf("file has %d lines, want %d", n, writers*each)
	}
	for w := range writers {
		for i := range each {
			if line := fmt.Sprintf("w%d-%d\n", w, i); !strings.Contains(got, line) {
				t.Errorf("line %q lost", line)
			}
		}
	}
	noTemps(t, d.Path())
}

// plant fills a Dir with what sandboxed code could leave in /workspace and
// returns the outside directory the links point at.
func plant(t *testing.T, d *storage.Dir) string {
	t.Helper()
	outside := t.TempDir()
	put(t, filepath.Join(outside, "secret"), "host secret\n")
	put(t, filepath.Join(outside, "x.py"), "host code\n")
	put(t, filepath.Join(d.Path(), "real.py"), "inside\n")
	at := func(name string) string { return filepath.Join(d.Path(), name) }
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Symlink(filepath.Join(outside, "secret"), at("abs.py")))
	must(os.Symlink("../../"+filepath.Base(outside)+"/secret", at("rel.py")))
	must(os.Symlink("/etc/passwd", at("passwd.py")))
	must(os.Symlink("real.py", at("inside.py")))
	must(os.Symlink(outside, at("d")))
	must(os.Symlink("missing-target", at("dangling.py")))
	must(os.Mkdir(at("dir.py"), 0o755))
	plantSpecial(t, at)
	return outside
}

// TestStorageHostile: symlinks (out, in, dangling, as a parent), FIFOs,
// sockets and directories are refused by every operation, promptly, and
// nothing outside the root changes. Final symlinks are refused even when
// they point inside the root: a file the tools act on must be the file
// named, never a link the sandbox planted.
func TestStorageHostile(t *testing.T) {
	skipOnWine(t, symlinksPlanted)
	d := open(t)
	outside := plant(t, d)
	ops := []struct {
		name string
		do   func(rel string) error
	}{
		{"Read", func(rel string) error { _, _, err := d.Read(rel, 1<<20); return err }},
		{"Append", func(rel string) error { _, err := d.Append(rel, []byte("pwned\n"), 1<<20); return err }},
		{"Write", func(rel string) error { return d.Write(rel, []byte("pwned\n")) }},
		{"Create", func(rel string) error { return d.Create(rel, []byte("pwned\n")) }},
	}
	tests := []struct {
		rel        string
		want       error // for Read, Append and Write
		wantCreate error
	}{
		{"abs.py", storage.ErrNotFile, fs.ErrExist},
		{"rel.py", storage.ErrNotFile, fs.ErrExist},
		{"passwd.py", storage.ErrNotFile, fs.ErrExist},
		{"inside.py", storage.ErrNotFile, fs.ErrExist},
		{"dangling.py", storage.ErrNotFile, fs.ErrExist},
		{"d/x.py", storage.ErrOutside, storage.ErrOutside},
		{"d/new.py", storage.ErrOutside, storage.ErrOutside},
		{"fifo.py", storage.ErrNotFile, fs.ErrExist},
		{"sock.py", storage.ErrNotFile, fs.ErrExist},
		{"dir.py", storage.ErrNotFile, fs.ErrExist},
		{".", storage.ErrNotFile, fs.ErrExist},
	}
	for _, tt := range tests {
		if _, err := os.Lstat(filepath.Join(d.Path(), tt.rel)); errors.Is(err, fs.ErrNotExist) && !strings.HasSuffix(tt.rel, "new.py") {
			continue // a FIFO or socket, on a platform that has none (plantSpecial)
		}
		for _, op := range ops {
			t.Run(op.name+"/"+tt.rel, func(t *testing.T) {
				want := tt.want
				if op.name == "Create" {
					want = tt.wantCreate
				}
				err := within(t, op.name, func() error { return op.do(tt.rel) })
				if !errors.Is(err, want) {
					t.Errorf("%s(%q) = %v, want %v", op.name, tt.rel, err, want)
				}
			})
		}
	}
	checkUntouched(t, d, outside)
}

// checkUntouched verifies the planted entries and the outside directory
// are exactly as plant left them, and no temp file is anywhere.
func checkUntouched(t *testing.T, d *storage.Dir, outside string) {
	t.Helper()
	want := map[string]string{"secret": "host secret\n", "x.py": "host code\n"}
	entries, _ := os.ReadDir(outside)
	if len(entries) != len(want) {
		t.Errorf("outside directory holds %d entries, want %d", len(entries), len(want))
	}
	for name, content := range want {
		if got := slurp(t, filepath.Join(outside, name)); got != content {
			t.Errorf("outside file %s changed to %q", name, got)
		}
	}
	if got := slurp(t, filepath.Join(d.Path(), "real.py")); got != "inside\n" {
		t.Errorf("the symlink's inside target changed to %q", got)
	}
	kinds := map[string]fs.FileMode{"abs.py": fs.ModeSymlink, "inside.py": fs.ModeSymlink, "d": fs.ModeSymlink,
		"fifo.py": fs.ModeNamedPipe, "sock.py": fs.ModeSocket, "dir.py": fs.ModeDir}
	for name, kind := range kinds {
		fi, err := os.Lstat(filepath.Join(d.Path(), name))
		if errors.Is(err, fs.ErrNotExist) && (name == "fifo.py" || name == "sock.py") && !specialFiles {
			continue
		}
		if err != nil || fi.Mode().Type() != kind {
			t.Errorf("%s is no longer a %v: %v", name, kind, err)
		}
	}
	noTemps(t, d.Path())
	noTemps(t, outside)
}

// TestStorageStat does not follow a final symlink and refuses an escaping parent.
func TestStorageStat(t *testing.T) {
	skipOnWine(t, symlinksPlanted)
	d := open(t)
	plant(t, d)
	fi, err := d.Stat("abs.py")
	if err != nil || fi.Mode().Type() != fs.ModeSymlink {
		t.Errorf("Stat(abs.py) = %v, %v; want the symlink itself", fi, err)
	}
	if _, err := d.Stat("d/x.py"); !errors.Is(err, storage.ErrOutside) {
		t.Errorf("Stat(d/x.py) = %v, want ErrOutside", err)
	}
	if _, err := d.Stat("nope.py"); !errors.Is(err, storage.ErrNotFound) {
		t.Errorf("Stat(nope.py) = %v, want ErrNotFound", err)
	}
}

// TestStorageNewCodeName keeps names inside the root and recognizable.
func TestStorageNewCodeName(t *testing.T) {
	tests := []struct{ in, prefix string }{
		{"", "code_"},
		{"report", "report_"},
		{"report.py", "report_"},
		{"../../etc/evil", "evil_"},
		{"a b;c", "a_b_c_"},
		{"..", "code_"},
	}
	for _, tt := range tests {
		got := storage.NewCodeName(tt.in)
		if !strings.HasPrefix(got, tt.prefix) || !strings.HasSuffix(got, ".py") || !filepath.IsLocal(got) || strings.Contains(got, "/") {
			t.Errorf("NewCodeName(%q) = %q, want %s<random>.py", tt.in, got, tt.prefix)
		}
	}
	if a, b := storage.NewCodeName("x"), storage.NewCodeName("x"); a == b {
		t.Errorf("two names for x are equal: %s", a)
	}
}

// TestRelRefusesUnsafeNames: names that a listing or a log could not show
// as one line of text (control characters such as newlines, invalid
// UTF-8), paths longer than MaxPathBytes and deeper than MaxPathDepth are
// refused with ErrBadName, at once; a path at both caps is accepted.
func TestRelRefusesUnsafeNames(t *testing.T) {
	d := open(t)
	deep := strings.Repeat("d/", 2000) + "x.py"
	bad := []string{"a\nb.py", "x\r.py", "tab\there.py", "esc\x1b[31m.py", "del\x7f.py", "bad\xff\xfe.py", "ok/\xc3(.py",
		deep, strings.Repeat("a", storage.MaxPathBytes+1)}
	for _, p := range bad {
		start := time.Now()
		if _, err := d.Rel(p); !errors.Is(err, storage.ErrBadName) {
			t.Errorf("Rel(%.40q) = %v; want ErrBadName", p, err)
		}
		if took := time.Since(start); took > time.Second {
			t.Errorf("Rel(%.40q) took %v", p, took)
		}
	}
	atCap := strings.Repeat("d/", storage.MaxPathDepth-1) + "x.py"
	rel, err := d.Rel(atCap)
	if err != nil {
		t.Fatalf("Rel at the depth cap: %v", err)
	}
	if err := d.Write(rel, []byte("print(1)\n")); err != nil {
		t.Errorf("Write at the depth cap: %v", err)
	}
	if _, err := d.Rel("données/été ✓.py"); err != nil {
		t.Errorf("a UTF-8 name with accents was refused: %v", err)
	}
}
