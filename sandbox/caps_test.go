package sandbox_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pybox-dev/pybox/internal/engine"
	"github.com/pybox-dev/pybox/sandbox"
)

// TestCapabilities: Docker can do everything pybox asks of a backend;
// Kubernetes reaches the egress proxy (over its channel) and nothing else
// (pybox gives scratch workspaces, refuses installs, builds no image); a
// backend that does not say, nothing besides running containers (pybox
// also refuses allowlists).
func TestCapabilities(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    sandbox.Backend
		want sandbox.Capabilities
	}{
		{"docker", sandbox.Docker(nil), sandbox.Capabilities{HostFolders: true, LocalImages: true, Egress: true}},
		{"kubernetes", sandbox.Kubernetes(nil), sandbox.Capabilities{Egress: true}},
		{"a backend that does not say", newFake(), sandbox.Capabilities{}},
	} {
		if diff := cmp.Diff(tc.want, sandbox.CapabilitiesOf(tc.b)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
}

// listFails is a backend whose API does not answer.
type listFails struct{ *fakeBackend }

func (listFails) List(context.Context, map[string]string) ([]engine.Summary, error) {
	return nil, errors.New("the API server does not answer")
}

// TestHealthOfOtherBackends: a backend without a check of its own is
// healthy when it lists pybox's containers, and the report says why not.
func TestHealthOfOtherBackends(t *testing.T) {
	got, ok := sandbox.Health(t.Context(), newFake(), "img:1")
	if diff := cmp.Diff(map[string]string{"backend": "ok", "image": "img:1"}, got); !ok || diff != "" {
		t.Errorf("healthy fake: ok %v (-want +got):\n%s", ok, diff)
	}
	got, ok = sandbox.Health(t.Context(), listFails{newFake()}, "img:1")
	if ok || got["backend"] != "the API server does not answer" {
		t.Errorf("unreachable fake: ok %v, report %v; want not ok, naming the error", ok, got)
	}
}
