// Package wheel writes minimal pure-Python wheels (a zip with the module,
// METADATA, WHEEL and RECORD) and source distributions with an in-tree
// build backend. Tests and the benchmark use it to install packages
// without any package index.
package wheel

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Wheel describes a tiny pure-Python package.
type Wheel struct {
	Name     string   // distribution and module name, e.g. "pyboxdemo"
	Version  string   // e.g. "1.0"
	Requires []string // Requires-Dist lines, e.g. "pyboxbase>=1"
	Code     string   // the module's __init__.py
	// Files are further archive members by path, e.g. the data file
	// "name-1.0.data/scripts/tool" (installed into the scripts directory).
	Files map[string]string
}

// Write builds w in dir and returns the wheel's path.
func Write(dir string, w Wheel) (string, error) {
	module := strings.ReplaceAll(w.Name, "-", "_")
	dist := module + "-" + w.Version
	meta := fmt.Sprintf("Metadata-Version: 2.1\nName: %s\nVersion: %s\n", w.Name, w.Version)
	for _, r := range w.Requires {
		meta += "Requires-Dist: " + r + "\n"
	}
	files := [][2]string{
		{module + "/__init__.py", w.Code},
		{dist + ".dist-info/METADATA", meta},
		{dist + ".dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: pybox\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
	}
	for _, name := range slices.Sorted(maps.Keys(w.Files)) {
		files = append(files, [2]string{name, w.Files[name]})
	}
	var record strings.Builder
	for _, f := range files {
		sum := sha256.Sum256([]byte(f[1]))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", f[0], base64.RawURLEncoding.EncodeToString(sum[:]), len(f[1]))
	}
	fmt.Fprintf(&record, "%s.dist-info/RECORD,,\n", dist)
	files = append(files, [2]string{dist + ".dist-info/RECORD", record.String()})
	data, err := zipFiles(files)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, dist+"-py3-none-any.whl")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return "", fmt.Errorf("write wheel: %w", err)
	}
	return path, nil
}

func zipFiles(files [][2]string) ([]byte, error) {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, f := range files {
		fw, err := zw.Create(f[0])
		if err != nil {
			return nil, fmt.Errorf("zip %s: %w", f[0], err)
		}
		if _, err := fw.Write([]byte(f[1])); err != nil {
			return nil, fmt.Errorf("zip %s: %w", f[0], err)
		}
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("zip: %w", err)
	}
	return buf.Bytes(), nil
}
