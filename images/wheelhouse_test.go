package images

import (
	"os"
	"path/filepath"
	"testing"
)

// TestWheelhouseDigestFollowsSymlinks: the install cache key changes when
// what the install container sees changes, also through symlinks (a
// wheelhouse path that is a symlink, wheels that are symlinks), which
// Docker's bind mount and pip follow.
func TestWheelhouseDigestFollowsSymlinks(t *testing.T) {
	root := t.TempDir()
	write := func(rel, content string) string {
		t.Helper()
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	link := func(target, rel string) {
		t.Helper()
		if err := os.Symlink(target, filepath.Join(root, rel)); err != nil {
			t.Fatal(err)
		}
	}
	const whl = "pkg-1.0-py3-none-any.whl"
	wheel := write("real/"+whl, "version one")
	link("real", "current")
	if err := os.Mkdir(filepath.Join(root, "links"), 0o755); err != nil {
		t.Fatal(err)
	}
	link(wheel, "links/"+whl)
	for _, dir := range []string{"current", "links"} {
		before := wheelhouseDigest(filepath.Join(root, dir))
		write("real/"+whl, "version one, rebuilt for "+dir)
		if after := wheelhouseDigest(filepath.Join(root, dir)); after == before {
			t.Errorf("wheelhouse %s: replacing a wheel it leads to kept the key %s", dir, after)
		}
	}
}
