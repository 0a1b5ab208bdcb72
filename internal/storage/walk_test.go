package storage_test

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/pybox-dev/pybox/internal/storage"
)

func TestMeasureCountsTheTreeAndStopsAtTheLimit(t *testing.T) {
	skipOnWine(t, symlinksPlanted)
	dir := t.TempDir()
	outside := t.TempDir()
	put(t, filepath.Join(outside, "big"), strings.Repeat("x", 1<<20))
	put(t, filepath.Join(dir, "a.txt"), "12345")
	put(t, filepath.Join(dir, "sub", "b.txt"), strings.Repeat("y", 5000))
	if err := os.Symlink(outside, filepath.Join(dir, "link")); err != nil { // never followed
		t.Fatal(err)
	}
	u, err := storage.Measure(dir, storage.Usage{})
	if err != nil {
		t.Fatal(err)
	}
	// a.txt, sub, sub/b.txt, link; bytes at least the sizes, at most a block each more.
	if u.Files != 4 || u.Bytes < 5005 || u.Bytes > 5005+2*8192 {
		t.Fatalf("usage = %+v, want 4 entries and about 5005 bytes (the symlinked 1 MiB not counted)", u)
	}
	for i := range 50 {
		put(t, filepath.Join(dir, "many", fmt.Sprintf("f%02d", i)), "")
	}
	u, _ = storage.Measure(dir, storage.Usage{Files: 10})
	if !u.Over(storage.Usage{Files: 10}) || u.Files != 11 {
		t.Fatalf("usage with a stop at 10 entries = %+v, want it to stop at 11", u)
	}
	if u, err := storage.Measure(filepath.Join(dir, "missing"), storage.Usage{}); err != nil || u != (storage.Usage{}) {
		t.Fatalf("a missing folder measures %+v, %v; want zero", u, err)
	}
}

// A folder a program filled with entries costs a bounded walk: time and
// memory do not grow with the number of entries (the old walk read whole
// folders at once: 25,000 entries cost about 9 MiB).
func TestFilesReadsAHugeFolderInBoundedMemory(t *testing.T) {
	skipOnWine(t, symlinksPlanted)
	if testing.Short() {
		t.Skip("makes 25,000 entries")
	}
	d := open(t)
	const n = 25_000
	outs := filepath.Join(d.Path(), "outs")
	if err := os.Mkdir(outs, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range n { // symlinks: entries that are not files, so the walk goes on to its entry cap
		if err := os.Symlink("x", filepath.Join(outs, fmt.Sprintf("entry-%06d", i))); err != nil {
			t.Fatal(err)
		}
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	files, more := d.Files(100, 5_000)
	runtime.ReadMemStats(&after)
	if len(files) != 0 || !more {
		t.Fatalf("Files = %d files, more=%v; want none and more (the entry cap)", len(files), more)
	}
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("looking at 5,000 of a folder's %d entries allocated %d KiB", n, allocated>>10)
	if allocated > 4<<20 {
		t.Fatalf("listing allocated %d bytes; want it bounded by the caps, not the folder", allocated)
	}
}

func TestFilesDoesNotFollowSymlinksOrListTempFiles(t *testing.T) {
	skipOnWine(t, symlinksPlanted)
	d := open(t)
	outside := t.TempDir()
	put(t, filepath.Join(outside, "secret.txt"), "s")
	put(t, filepath.Join(d.Path(), "keep", "a.txt"), "a")
	put(t, filepath.Join(d.Path(), ".pybox-tmp-0123456789ab"), "half")
	os.Symlink(outside, filepath.Join(d.Path(), "out"))
	os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(d.Path(), "s.txt"))
	files, more := d.Files(10, 100)
	if more || len(files) != 1 || files[0] != (storage.File{Path: "keep/a.txt", Bytes: 1}) {
		t.Fatalf("Files = %+v, more=%v; want only keep/a.txt", files, more)
	}
}
