package testenv

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pybox-dev/pybox/internal/engine"
)

// BuildImage builds tag from a Dockerfile and executable files (name ->
// content; may be nil) in a tar build context, and removes it when the
// test ends. Call it before anything that commits layers on it (servers,
// installers), so those, removed by their own later cleanups, go first.
// The tag must be the test's own (no other test, process or suite on the
// daemon builds or uses it); the build then needs no layer-cache lock: its
// first step after FROM is a label of its own, so no other build shares
// its build cache (two test processes building the same Dockerfile did,
// and one's removal of its image pruned the intermediate image the other's
// build was using: "No such image").
func BuildImage(t testing.TB, eng *engine.Client, tag, dockerfile string, executables map[string]string) {
	t.Helper()
	dockerfile = ownBuild(t, dockerfile)
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

// ownBuild adds a label with a fresh value after dockerfile's first FROM.
func ownBuild(t testing.TB, dockerfile string) string {
	t.Helper()
	lines := strings.SplitAfter(dockerfile, "\n")
	for i, l := range lines {
		if f := strings.Fields(l); len(f) > 0 && strings.EqualFold(f[0], "FROM") {
			label := fmt.Sprintf("LABEL pybox.test.build=%d-%d\n", os.Getpid(), time.Now().UnixNano())
			if !strings.HasSuffix(l, "\n") {
				label = "\n" + label
			}
			return strings.Join(slices.Insert(lines, i+1, label), "")
		}
	}
	t.Fatalf("the test image's Dockerfile has no FROM:\n%s", dockerfile)
	return ""
}
