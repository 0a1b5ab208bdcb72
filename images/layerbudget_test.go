package images_test

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/pybox-dev/pybox/images"
	"github.com/pybox-dev/pybox/internal/testenv"
)

// bigWheel writes a wheel name 1.0 holding size bytes of data that do not
// compress (so the wheel is as big as what it installs).
func bigWheel(t *testing.T, dir, name string, size int) {
	t.Helper()
	b := make([]byte, size/2)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	testenv.WriteWheel(t, dir, testenv.Wheel{Name: name, Version: "1.0", Code: "VERSION = '1.0'\n",
		Files: map[string]string{name + "/blob.txt": hex.EncodeToString(b)}})
}

// TestLayerBudgetRefusesInstallsPastIt: a tenant's installs commit package
// layers within its layer budget (Installer.LayerBytes). With a budget of
// 6 MiB, an install of 2 MiB commits; one of 8 MiB more is refused with
// ErrLayerBudget, saying how much the layers hold and the budget, and
// commits nothing; another tenant's budget is its own. Before the budget
// the 8 MiB layer was committed like any other: nothing bounded the
// tenant's layers.
func TestLayerBudgetRefusesInstallsPastIt(t *testing.T) {
	eng := testenv.Docker(t)
	layers := testenv.LockLayerCache(t, eng)
	t.Cleanup(func() { layers.RemoveNew(t) })
	testenv.RuntimeImage(t, eng, images.VariantBase)
	wh := testenv.Wheelhouse(t)
	bigWheel(t, wh, "pyboxsmall", 2<<20)
	bigWheel(t, wh, "pyboxlarge", 8<<20)
	env, err := images.Environment{}.Normalize()
	if err != nil {
		t.Fatal(err)
	}
	env.ImageID = inspect(t, eng, env.Image).ID
	tenant := "budget-" + newTestOwner(t).id
	in := &images.Installer{Engine: eng, Owner: newTestOwner(t), Tenant: tenant, Index: images.Index{Wheelhouse: wh, Network: "none"},
		LayerBytes: 6 << 20}
	small, err := in.Install(t.Context(), env, []string{"pyboxsmall"})
	if err != nil {
		t.Fatalf("a 2 MiB install within a 6 MiB budget: %v\n%s", err, small.Output)
	}
	before := len(layers.New(t))
	large, err := in.Install(t.Context(), small.Env, []string{"pyboxlarge"})
	if !errors.Is(err, images.ErrLayerBudget) {
		t.Fatalf("an 8 MiB install past the budget: %v; want ErrLayerBudget (layer %s)", err, large.Env.Image)
	}
	t.Logf("refused: %v", err)
	if after := len(layers.New(t)); after != before {
		t.Errorf("%d layers after the refused install, %d before: it committed one", after, before)
	}
	other := &images.Installer{Engine: eng, Owner: newTestOwner(t), Tenant: tenant + "-other", Index: images.Index{Wheelhouse: wh, Network: "none"},
		LayerBytes: 12 << 20}
	if res, err := other.Install(t.Context(), env, []string{"pyboxlarge"}); err != nil {
		t.Errorf("another tenant's 8 MiB install within its 12 MiB budget: %v\n%s", err, res.Output)
	}
}
