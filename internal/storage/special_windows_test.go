package storage_test

import (
	"errors"
	"io/fs"
	"path/filepath"
	"testing"

	"golang.org/x/sys/windows"

	"github.com/pybox-dev/pybox/internal/storage"
)

// specialFiles: Windows folders hold no FIFOs (pipes live in their own
// namespace), and pybox plants no unix socket there.
const specialFiles = false

func plantSpecial(*testing.T, func(string) string) {}

// fileOwner: Windows files have no uid and gid.
func fileOwner(fs.FileInfo) (uid, gid int, ok bool) { return 0, 0, false }

// modeBits: Windows files have no Unix permission bits.
const modeBits = false

// TestRelWindowsPaths: Windows spellings that leave the storage folder
// (another drive, the drive's root, backslashes climbing out, a UNC share,
// a drive-relative path) are refused; backslashes inside it are fine.
func TestRelWindowsPaths(t *testing.T) {
	d := open(t)
	vol := filepath.VolumeName(d.Path())
	for _, p := range []string{vol + `\Windows\win.ini`, `..\..\a.py`, `sub\..\..\a.py`, `D:\code\a.py`,
		`\\server\share\a.py`, vol + `a.py`, d.Path() + `\..\a.py`} {
		if got, err := d.Rel(p); !errors.Is(err, storage.ErrOutside) {
			t.Errorf("Rel(%q) = %q, %v; want ErrOutside", p, got, err)
		}
	}
	for p, want := range map[string]string{`sub\a.py`: `sub\a.py`, d.Path() + `\sub\a.py`: `sub\a.py`, "sub/a.py": `sub\a.py`} {
		if got, err := d.Rel(p); got != want || err != nil {
			t.Errorf("Rel(%q) = %q, %v; want %q", p, got, err, want)
		}
	}
}

// skipOnWine skips a test of a Windows behaviour Wine does not have (CI
// runs the Windows build under Wine); why says which.
func skipOnWine(t *testing.T, why string) {
	t.Helper()
	if windows.NewLazySystemDLL("ntdll.dll").NewProc("wine_get_version").Find() == nil {
		t.Skip("under Wine: " + why)
	}
}

const symlinksPlanted = "Wine's os.Symlink makes no symbolic link Windows would see (no reparse point), and the test plants them"
