// Package testenv gives integration tests the real Docker daemon and the
// real runtime image. With PYBOX_REQUIRE_DOCKER=1 (set by .ci/run) a missing
// daemon fails the test instead of skipping it.
package testenv

import (
	"context"
	"os"
	"slices"
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
	SkipShort(t, "the Docker daemon")
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

// Runtimes lists the OCI runtimes tests run sandboxes under: "" (the
// daemon's default, runc) and "runsc" when the daemon has gVisor
// registered. With PYBOX_REQUIRE_RUNSC=1 (.ci/run sets it) a daemon
// without runsc fails the test instead of running the runc pass alone.
func Runtimes(t testing.TB, eng *engine.Client) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v, err := eng.Ping(ctx)
	if err != nil {
		t.Fatalf("ask the daemon for its runtimes: %v", err)
	}
	if slices.Contains(v.Runtimes, "runsc") {
		return []string{"", "runsc"}
	}
	if os.Getenv("PYBOX_REQUIRE_RUNSC") == "1" {
		t.Fatalf("gVisor is required (PYBOX_REQUIRE_RUNSC=1) but the daemon has no runsc runtime (it has %v); .ci/run installs and registers it", v.Runtimes)
	}
	t.Log("the daemon has no runsc runtime: the gVisor pass is skipped")
	return []string{""}
}

// RuntimeName names a runtime from Runtimes for subtests.
func RuntimeName(rt string) string {
	if rt == "" {
		return "runc"
	}
	return rt
}
