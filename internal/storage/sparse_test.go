package storage_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/pybox-dev/pybox/internal/storage"
)

// TestSparseReadBackBounded: a sparse file whose apparent size is far past
// any quota (1 TiB, a few blocks on disk), as a program can leave in its
// workspace, is read back by the server only within the caller's cap:
// Read stops at its limit (and says the file was cut), Append refuses by
// the apparent size before reading, and CopyFrom is charged the apparent
// size before a byte is written (an account that refuses it leaves
// nothing). None is sized by the apparent size unbounded.
func TestSparseReadBackBounded(t *testing.T) {
	d := open(t)
	if err := d.Write("huge", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filepath.Join(d.Path(), "huge"), 1<<40); err != nil {
		t.Skipf("no sparse files here: %v", err)
	}
	data, cut, err := d.Read("huge", 1<<20)
	if err != nil || !cut || len(data) != 1<<20 {
		t.Errorf("Read with a 1 MiB cap: %d bytes, cut %v, %v; want 1 MiB, cut", len(data), cut, err)
	}
	if _, err := d.Append("huge", []byte("y"), 8<<20); !errors.Is(err, storage.ErrTooLarge) {
		t.Errorf("Append to a 1 TiB file with an 8 MiB cap: %v; want ErrTooLarge", err)
	}
	dst := open(t)
	var charged int64
	err = dst.CopyFrom("copy", d, "huge", func(size int64) error { charged = size; return errQuotaTest })
	if !errors.Is(err, errQuotaTest) || charged != 1<<40 {
		t.Errorf("CopyFrom: charged %d, %v; want the apparent 1 TiB charged and refused", charged, err)
	}
	if _, err := os.Lstat(filepath.Join(dst.Path(), "copy")); !os.IsNotExist(err) {
		t.Errorf("a refused copy left a file: %v", err)
	}
}

var errQuotaTest = errors.New("over the quota")
