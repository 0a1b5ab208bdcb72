package images_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/pybox-dev/pybox/images"
	"github.com/pybox-dev/pybox/internal/testenv"
)

// newTenantManager is newManager for tenant, started from the state file
// at statePath.
func newTenantManager(t *testing.T, tenant, wh, statePath string) (*images.Manager, error) {
	t.Helper()
	eng := testenv.Docker(t)
	testenv.LockLayerCache(t, eng)
	testenv.RuntimeImage(t, eng, images.VariantBase)
	in := &images.Installer{Engine: eng, Owner: newTestOwner(t), Tenant: tenant, Index: images.Index{Wheelhouse: wh, Network: "none"}}
	m, err := images.NewManager(images.ManagerConfig{
		EnsureRuntime: func(context.Context, string) error { return nil },
		Installer:     in, Prober: fakeProber{out: "3.11"}, StatePath: statePath,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m, m.Start(t.Context(), images.Environment{})
}

// TestSavedEnvironmentIsCheckedForOwner: a saved environment naming
// another tenant's package layer (a state file written before layers had
// owners, or copied) is dropped at start for the configured one; the
// owner's own still comes back.
func TestSavedEnvironmentIsCheckedForOwner(t *testing.T) {
	wh := testenv.Wheelhouse(t)
	stateA := filepath.Join(t.TempDir(), "environment.json")
	a, err := newTenantManager(t, "a", wh, stateA)
	if err != nil {
		t.Fatal(err)
	}
	res, err := a.Install(t.Context(), []string{"pyboxbase==1.0"})
	if err != nil {
		t.Fatalf("install: %v\n%s", err, res.Output)
	}
	removeAtCleanup(t, testenv.Docker(t), res.Env.ImageID)
	if got := inspect(t, testenv.Docker(t), res.Env.ImageID).Labels[images.LabelTenant]; got != "a" {
		t.Errorf("the layer's %s label: %q; want a", images.LabelTenant, got)
	}
	saved, err := os.ReadFile(stateA)
	if err != nil {
		t.Fatal(err)
	}
	stateB := filepath.Join(t.TempDir(), "environment.json")
	if err := os.WriteFile(stateB, saved, 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := newTenantManager(t, "b", wh, stateB)
	if err != nil {
		t.Fatalf("tenant b's start: %v", err)
	}
	if got := b.Active(); got.Image != images.Tag(images.VariantBase) || got.ImageID == res.Env.ImageID {
		t.Errorf("tenant b started in %s (%s), tenant a's layer; want the configured %s", got.Image, got.ImageID, images.Tag(images.VariantBase))
	}
	again, err := newTenantManager(t, "a", wh, stateA)
	if err != nil {
		t.Fatalf("tenant a's restart: %v", err)
	}
	if got := again.Active(); got.ImageID != res.Env.ImageID {
		t.Errorf("tenant a restarted in %s; want its own layer %s", got.Image, res.Env.Image)
	}
}
