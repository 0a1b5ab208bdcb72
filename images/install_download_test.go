package images

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestUnpackFlat: the download stream is a container's output, so hostile:
// only plain regular files land in the folder, within the size bound.
func TestUnpackFlat(t *testing.T) {
	type entry struct {
		name string
		kind byte
		body string
	}
	tests := []struct {
		name    string
		entries []entry
		max     int64
		wantErr string
	}{
		{"wheels", []entry{{"a-1.0-py3-none-any.whl", tar.TypeReg, "aa"}, {"b-1.0.tar.gz", tar.TypeReg, "b"}}, 10, ""},
		{"a path out", []entry{{"../escape.whl", tar.TypeReg, "x"}}, 10, "unexpected entry"},
		{"a folder", []entry{{"sub/a.whl", tar.TypeReg, "x"}}, 10, "unexpected entry"},
		{"a symlink", []entry{{"a.whl", tar.TypeSymlink, ""}}, 10, "unexpected entry"},
		{"a dot file", []entry{{".pth", tar.TypeReg, "x"}}, 10, "unexpected entry"},
		{"too large", []entry{{"a.whl", tar.TypeReg, "123456"}, {"b.whl", tar.TypeReg, "123456"}}, 10, "exceed"},
		{"a name twice", []entry{{"a.whl", tar.TypeReg, "1"}, {"a.whl", tar.TypeReg, "2"}}, 10, "stage a.whl"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			tw := tar.NewWriter(&buf)
			for _, e := range tt.entries {
				hdr := &tar.Header{Name: e.name, Typeflag: e.kind, Mode: 0o777, Size: int64(len(e.body)), Linkname: "/etc/passwd"}
				if e.kind != tar.TypeReg {
					hdr.Size = 0
				}
				if err := tw.WriteHeader(hdr); err != nil {
					t.Fatal(err)
				}
				tw.Write([]byte(e.body))
			}
			tw.Close()
			parent := t.TempDir()
			dir := filepath.Join(parent, "downloads")
			os.Mkdir(dir, 0o755)
			err := unpackFlat(&buf, dir, tt.max)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("unpackFlat: %v; want error %q", err, tt.wantErr)
			}
			if left, _ := os.ReadDir(parent); len(left) != 1 {
				t.Errorf("something was written beside the folder: %v", left)
			}
			files, _ := os.ReadDir(dir)
			for _, f := range files {
				fi, _ := os.Lstat(filepath.Join(dir, f.Name()))
				if !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o644 {
					t.Errorf("%s: mode %v; want a regular file 0644", f.Name(), fi.Mode())
				}
			}
		})
	}
}
