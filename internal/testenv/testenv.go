// Package testenv gives integration tests the real Docker daemon and the
// real runtime image. With PYBOX_REQUIRE_DOCKER=1 (set by .ci/run) a missing
// daemon fails the test instead of skipping it.
package testenv

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pybox-dev/pybox/images"
	"github.com/pybox-dev/pybox/internal/engine"
)

// Docker returns a client for the real daemon, or skips (fails under
// PYBOX_REQUIRE_DOCKER=1) when none answers.
func Docker(t testing.TB) *engine.Client {
	t.Helper()
	eng, err := engine.New(nil)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err = eng.Ping(ctx)
	}
	if err != nil {
		if os.Getenv("PYBOX_REQUIRE_DOCKER") == "1" {
			t.Fatalf("Docker is required (PYBOX_REQUIRE_DOCKER=1) but not reachable: %v", err)
		}
		t.Skipf("Docker not reachable, skipping: %v", err)
	}
	t.Cleanup(func() { eng.Close() })
	return eng
}

// RuntimeImage makes sure the runtime image for variant exists (building it
// offline on this kind of machine the first time) and returns its tag.
func RuntimeImage(t testing.TB, eng *engine.Client, variant string) string {
	t.Helper()
	b := &images.Builder{Engine: eng, Progress: logWriter{t}}
	if _, err := b.Ensure(context.Background(), variant); err != nil {
		t.Fatalf("runtime image %s: %v", variant, err)
	}
	return images.Tag(variant)
}

// Managed lists the pybox containers that exist now.
func Managed(t testing.TB, eng *engine.Client, labels map[string]string) []engine.Summary {
	t.Helper()
	all := map[string]string{"pybox.managed": "true"}
	for k, v := range labels {
		all[k] = v
	}
	list, err := eng.List(context.Background(), all)
	if err != nil {
		t.Fatalf("list containers: %v", err)
	}
	return list
}

type logWriter struct{ t testing.TB }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
