package wheel

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Sdist describes a source distribution whose build backend is its own
// module: building it runs Backend's build_wheel with no build requirements,
// so pip can build it with no index at all.
type Sdist struct {
	Name    string // distribution name, e.g. "pyboxevil"
	Version string // e.g. "1.0"
	Backend string // source of backend.py (a PEP 517 backend: build_wheel at least)
}

// WriteSdist builds s as NAME-VERSION.tar.gz in dir and returns its path.
func WriteSdist(dir string, s Sdist) (string, error) {
	root := strings.ReplaceAll(s.Name, "-", "_") + "-" + s.Version
	files := [][2]string{
		{"PKG-INFO", fmt.Sprintf("Metadata-Version: 2.1\nName: %s\nVersion: %s\n", s.Name, s.Version)},
		{"pyproject.toml", "[build-system]\nrequires = []\nbuild-backend = \"backend\"\nbackend-path = [\".\"]\n"},
		{"backend.py", s.Backend},
	}
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, f := range files {
		hdr := &tar.Header{Name: root + "/" + f[0], Mode: 0o644, Size: int64(len(f[1])), ModTime: time.Unix(0, 0)}
		if err := tw.WriteHeader(hdr); err != nil {
			return "", fmt.Errorf("tar %s: %w", f[0], err)
		}
		if _, err := tw.Write([]byte(f[1])); err != nil {
			return "", fmt.Errorf("tar %s: %w", f[0], err)
		}
	}
	if err := tw.Close(); err != nil {
		return "", fmt.Errorf("tar: %w", err)
	}
	if err := gz.Close(); err != nil {
		return "", fmt.Errorf("gzip: %w", err)
	}
	path := filepath.Join(dir, root+".tar.gz")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return "", fmt.Errorf("write sdist: %w", err)
	}
	return path, nil
}
