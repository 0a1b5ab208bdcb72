//go:build linux

package quotafs

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/pybox-dev/pybox/internal/storage"
)

// BenchmarkAccounting is what measuring an owner costs after an earlier
// run left 250,000 entries (outputs/junk): the meter's walk of its
// folders against the filesystem's statfs.
func BenchmarkAccounting(b *testing.B) {
	s := spec(b, b.TempDir(), 1024)
	s.Files = 300_000
	v := open(b, s)
	junk := filepath.Join(s.Binds[0].Target, "outputs", "junk")
	if err := os.MkdirAll(junk, 0o755); err != nil {
		b.Fatal(err)
	}
	for i := range 250_000 {
		if err := os.WriteFile(filepath.Join(junk, strconv.Itoa(i)), nil, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("walk", func(b *testing.B) {
		for b.Loop() {
			if u, err := storage.Measure(s.Binds[0].Target, storage.Usage{}); err != nil || u.Files < 250_000 {
				b.Fatal(u, err)
			}
		}
	})
	b.Run("statfs", func(b *testing.B) {
		for b.Loop() {
			if u, err := v.Usage(); err != nil || u.Files < 250_000 {
				b.Fatal(u, err)
			}
		}
	})
}
