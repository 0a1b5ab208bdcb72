package testenv

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/pybox-dev/pybox/images"
	"github.com/pybox-dev/pybox/internal/engine"
)

// Podman returns a client for rootful Podman's Docker-compatible socket
// (PYBOX_PODMAN_HOST, which .ci/run starts and sets) holding the base
// runtime image, copied from Docker's. Without the variable the test is
// skipped, unless PYBOX_REQUIRE_PODMAN=1.
func Podman(t testing.TB) (*engine.Client, string) {
	t.Helper()
	SkipShort(t, "Podman")
	host := os.Getenv("PYBOX_PODMAN_HOST")
	if host == "" {
		if os.Getenv("PYBOX_REQUIRE_PODMAN") == "1" {
			t.Fatal("Podman is required (PYBOX_REQUIRE_PODMAN=1) but PYBOX_PODMAN_HOST is not set; .ci/run starts it")
		}
		t.Skip("PYBOX_PODMAN_HOST is not set: the Podman tests are skipped")
	}
	eng, err := engine.NewAt(host, nil)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err = eng.Ping(ctx)
	}
	if err != nil {
		t.Fatalf("Podman at %s: %v", host, err)
	}
	t.Cleanup(func() { eng.Close() })
	tag := images.Tag(images.VariantBase)
	if _, found, err := eng.InspectImage(context.Background(), tag); err != nil || !found {
		RuntimeImage(t, Docker(t), images.VariantBase)
		cmd := exec.Command("sh", "-c", "docker save \"$0\" | podman load", tag)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("copy %s from Docker to Podman: %v\n%s", tag, err, out)
		}
	}
	return eng, host
}
