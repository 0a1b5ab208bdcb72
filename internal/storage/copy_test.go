package storage_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/pybox-dev/pybox/internal/storage"
)

// TestCopyFromCountsApparentSize: a sparse file is offered to take at its
// apparent size before anything is written; a refusal writes nothing.
func TestCopyFromCountsApparentSize(t *testing.T) {
	src, dst := open(t), open(t)
	f, err := os.Create(filepath.Join(src.Path(), "sparse.bin"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 30); err != nil { // 1 GiB apparent, nothing allocated
		t.Fatal(err)
	}
	f.Close()
	var offered int64
	full := errors.New("no room")
	err = dst.CopyFrom("out/sparse.bin", src, "sparse.bin", func(size int64) error { offered = size; return full })
	if !errors.Is(err, full) || offered != 1<<30 {
		t.Fatalf("err %v, offered %d; want the refusal, for 1 GiB", err, offered)
	}
	if _, err := os.Lstat(filepath.Join(dst.Path(), "out/sparse.bin")); !os.IsNotExist(err) {
		t.Errorf("a refused copy left a file: %v", err)
	}
	noTemps(t, dst.Path())
}

// TestCopyFromStopsAFileThatGrows: the copy writes no more than the size
// that was taken; a file that grew after it was measured is not saved.
func TestCopyFromStopsAFileThatGrows(t *testing.T) {
	src, dst := open(t), open(t)
	put(t, filepath.Join(src.Path(), "grows.txt"), "small")
	grow := func(size int64) error {
		return os.WriteFile(filepath.Join(src.Path(), "grows.txt"), make([]byte, 1<<20), 0o644)
	}
	if err := dst.CopyFrom("grows.txt", src, "grows.txt", grow); !errors.Is(err, storage.ErrTooLarge) {
		t.Fatalf("err %v; want ErrTooLarge", err)
	}
	if _, err := os.Lstat(filepath.Join(dst.Path(), "grows.txt")); !os.IsNotExist(err) {
		t.Errorf("a half-copied file was left: %v", err)
	}
	noTemps(t, dst.Path())
	put(t, filepath.Join(src.Path(), "same.txt"), "same size")
	if err := dst.CopyFrom("same.txt", src, "same.txt", func(int64) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if got := slurp(t, filepath.Join(dst.Path(), "same.txt")); got != "same size" {
		t.Errorf("copied %q", got)
	}
}
