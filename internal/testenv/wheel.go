package testenv

import (
	"os"
	"testing"

	"github.com/pybox-dev/pybox/internal/wheel"
)

// Wheel describes a tiny pure-Python package.
type Wheel = wheel.Wheel

// WriteWheel builds w as a wheel in dir and returns its path.
func WriteWheel(t testing.TB, dir string, w Wheel) string {
	t.Helper()
	path, err := wheel.Write(dir, w)
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// Wheelhouse writes the standard test wheels into a new directory:
// pyboxbase 1.0 and 2.0 (two versions of one package), pyboxdemo 1.0 which
// depends on pyboxbase>=1, and pyboxother 1.0. Each module has VERSION and
// pyboxdemo.answer() returns 42.
func Wheelhouse(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, w := range []Wheel{
		{Name: "pyboxbase", Version: "1.0", Code: "VERSION = '1.0'\n"},
		{Name: "pyboxbase", Version: "2.0", Code: "VERSION = '2.0'\n"},
		{Name: "pyboxdemo", Version: "1.0", Requires: []string{"pyboxbase>=1"},
			Code: "import pyboxbase\nVERSION = '1.0'\ndef answer():\n    return 42\n"},
		{Name: "pyboxother", Version: "1.0", Code: "VERSION = '1.0'\n"},
	} {
		WriteWheel(t, dir, w)
	}
	return dir
}

// Sdist describes a source distribution with an in-tree build backend.
type Sdist = wheel.Sdist

// WriteSdist builds s as a source distribution in dir and returns its path.
func WriteSdist(t testing.TB, dir string, s Sdist) string {
	t.Helper()
	path, err := wheel.WriteSdist(dir, s)
	if err != nil {
		t.Fatal(err)
	}
	return path
}
