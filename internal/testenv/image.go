package testenv

import (
	"archive/tar"
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/pybox-dev/pybox/internal/engine"
)

// BuildImage builds tag from a Dockerfile and executable files (name ->
// content; may be nil) in a tar build context, and removes it when the
// test ends. Call it before anything that commits layers on it (servers,
// installers), so those, removed by their own later cleanups, go first.
// The test holds the layer-cache lock (LockLayerCache) from here to its
// end: two test processes building the same Dockerfile share its build
// cache, and one's removal of its image pruned the intermediate image the
// other's build was using ("No such image").
func BuildImage(t testing.TB, eng *engine.Client, tag, dockerfile string, executables map[string]string) {
	t.Helper()
	LockLayerCache(t, eng)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(name, body string, mode int64) {
		hdr := &tar.Header{Name: name, Mode: mode, Size: int64(len(body)), ModTime: time.Now()}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	add("Dockerfile", dockerfile, 0o644)
	for name, body := range executables {
		add(name, body, 0o755)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := eng.RemoveImage(ctx, tag); err != nil {
			t.Errorf("removing test image %s: %v", tag, err)
		}
	})
	if err := eng.BuildImage(t.Context(), &buf, "Dockerfile", tag, nil, map[string]string{"pybox.test": "true"}, nil); err != nil {
		t.Fatalf("build %s: %v", tag, err)
	}
}
