package testenv

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Wheel describes a tiny pure-Python package.
type Wheel struct {
	Name     string   // distribution and module name, e.g. "pyboxdemo"
	Version  string   // e.g. "1.0"
	Requires []string // Requires-Dist lines, e.g. "pyboxbase>=1"
	Code     string   // the module's __init__.py
}

// WriteWheel builds w as a wheel in dir (a zip with the module, METADATA,
// WHEEL and RECORD) and returns its path.
func WriteWheel(t testing.TB, dir string, w Wheel) string {
	t.Helper()
	dist := strings.ReplaceAll(w.Name, "-", "_") + "-" + w.Version
	meta := fmt.Sprintf("Metadata-Version: 2.1\nName: %s\nVersion: %s\n", w.Name, w.Version)
	for _, r := range w.Requires {
		meta += "Requires-Dist: " + r + "\n"
	}
	files := [][2]string{
		{strings.ReplaceAll(w.Name, "-", "_") + "/__init__.py", w.Code},
		{dist + ".dist-info/METADATA", meta},
		{dist + ".dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: pybox-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	var record strings.Builder
	for _, f := range files {
		fw, err := zw.Create(f[0])
		if err == nil {
			_, err = fw.Write([]byte(f[1]))
		}
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256([]byte(f[1]))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", f[0], base64.RawURLEncoding.EncodeToString(sum[:]), len(f[1]))
	}
	fmt.Fprintf(&record, "%s.dist-info/RECORD,,\n", dist)
	if fw, err := zw.Create(dist + ".dist-info/RECORD"); err != nil {
		t.Fatal(err)
	} else if _, err := fw.Write([]byte(record.String())); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, dist+"-py3-none-any.whl")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
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
	os.Chmod(dir, 0o755)
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
