package storage_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pybox-dev/pybox/internal/storage"
)

// TestStorageList: entries come sorted by name with their kind, sizes for
// files only, symlinks reported and not followed, temp files hidden.
func TestStorageList(t *testing.T) {
	skipOnWine(t, symlinksPlanted)
	d := open(t)
	plant(t, d)
	put(t, filepath.Join(d.Path(), "dir.py", "inner.txt"), "12345")
	put(t, filepath.Join(d.Path(), ".pybox-tmp-0123456789ab"), "half-written")
	put(t, filepath.Join(d.Path(), ".hidden"), "ab")
	got, more, err := d.List(".", 1000)
	if err != nil || more {
		t.Fatalf("List(.) = %v, %v; want all entries", more, err)
	}
	want := []storage.Entry{
		{Name: ".hidden", Kind: "file", Size: 2},
		{Name: "abs.py", Kind: "symlink"},
		{Name: "d", Kind: "symlink"},
		{Name: "dangling.py", Kind: "symlink"},
		{Name: "dir.py", Kind: "dir"},
		{Name: "fifo.py", Kind: "other"},
		{Name: "inside.py", Kind: "symlink"},
		{Name: "passwd.py", Kind: "symlink"},
		{Name: "real.py", Kind: "file", Size: 7},
		{Name: "rel.py", Kind: "symlink"},
		{Name: "sock.py", Kind: "other"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("List(.) mismatch (-want +got):\n%s", diff)
	}
	got, _, err = d.List("dir.py", 10)
	if diff := cmp.Diff([]storage.Entry{{Name: "inner.txt", Kind: "file", Size: 5}}, got); diff != "" || err != nil {
		t.Errorf("List(dir.py) = %v (-want +got):\n%s", err, diff)
	}
}

// TestStorageListLimit: at most limit entries, the first by name, and
// truncated only when more exist; temp files do not count.
func TestStorageListLimit(t *testing.T) {
	d := open(t)
	const n = 1234
	var names []string
	for i := range n {
		name := fmt.Sprintf("f%04d", (i*7919)%n) // created out of order
		names = append(names, name)
		put(t, filepath.Join(d.Path(), name), "")
	}
	for i := range 50 {
		put(t, filepath.Join(d.Path(), fmt.Sprintf(".pybox-tmp-%02d", i)), "")
	}
	slices.Sort(names)
	tests := []struct {
		limit    int
		wantLen  int
		wantMore bool
	}{
		{1000, 1000, true},
		{n, n, false},
		{n + 1, n, false},
		{1, 1, true},
		{0, 0, true},
	}
	for _, tt := range tests {
		got, more, err := d.List(".", tt.limit)
		if err != nil || len(got) != tt.wantLen || more != tt.wantMore {
			t.Errorf("List(limit %d) = %d entries, more %v, %v; want %d, %v", tt.limit, len(got), more, err, tt.wantLen, tt.wantMore)
			continue
		}
		for i, e := range got {
			if e.Name != names[i] {
				t.Errorf("List(limit %d)[%d] = %s, want %s", tt.limit, i, e.Name, names[i])
				break
			}
		}
	}
}

// TestStorageListRefuses: only real directories inside the root are
// listed; symlinks (even to an inside directory), files, FIFOs and paths
// through an escaping symlink are refused, promptly.
func TestStorageListRefuses(t *testing.T) {
	skipOnWine(t, symlinksPlanted)
	d := open(t)
	plant(t, d)
	if err := os.Symlink("dir.py", filepath.Join(d.Path(), "dirlink")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		rel  string
		want error
	}{
		{"d", storage.ErrNotFile},
		{"dirlink", storage.ErrNotFile},
		{"real.py", storage.ErrNotFile},
		{"abs.py", storage.ErrNotFile},
		{"fifo.py", storage.ErrNotFile},
		{"sock.py", storage.ErrNotFile},
		{"d/sub", storage.ErrOutside},
		{"missing", storage.ErrNotFound},
	}
	for _, tt := range tests {
		err := within(t, "List "+tt.rel, func() error { _, _, err := d.List(tt.rel, 10); return err })
		if !errors.Is(err, tt.want) {
			t.Errorf("List(%q) = %v, want %v", tt.rel, err, tt.want)
		}
	}
}
