package bench

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"testing"

	"github.com/pybox-dev/pybox/images"
	"github.com/pybox-dev/pybox/internal/contract"
	"github.com/pybox-dev/pybox/internal/engine"
	"github.com/pybox-dev/pybox/internal/testenv"
)

// TestBenchRemovesOnlyItsLayers: when the bench ends it removes the
// package layers its installs made (a layer under another of them too),
// and no other: a layer another pybox server on the same daemon made
// while the bench ran stays.
func TestBenchRemovesOnlyItsLayers(t *testing.T) {
	eng := testenv.Docker(t)
	layers := testenv.LockLayerCache(t, eng) // it makes package layers, which other tests list
	base := testenv.RuntimeImage(t, eng, "base")
	ctx := context.Background()
	b := &bench{eng: eng, stderr: io.Discard, pkgs: packagePrefix()}

	first := standInLayer(t, eng, base, b.benchPackage(0))
	second := standInLayer(t, eng, first, b.benchPackage(0), b.benchPackage(1))
	other := standInLayer(t, eng, base, "pyboxother==1.0") // another server's install meanwhile

	// A test that holds the layer cache beside a bench neither counts nor
	// removes the bench's layers (it removes them itself).
	var seen []string
	for _, img := range layers.New(t) {
		seen = append(seen, img.ID)
	}
	if slices.Contains(seen, first) || slices.Contains(seen, second) || !slices.Contains(seen, other) {
		t.Errorf("a test's new layers %v; want %s and not the bench's %s %s", seen, other, first, second)
	}

	b.removeLayers(ctx)
	for _, id := range []string{first, second} {
		if _, found, err := eng.InspectImage(ctx, id); err != nil || found {
			t.Errorf("the bench's layer %s: found=%v err=%v; want it removed", id, found, err)
		}
	}
	if _, found, err := eng.InspectImage(ctx, other); err != nil || !found {
		t.Errorf("another server's layer %s: found=%v err=%v; want it kept", other, found, err)
	}
}

var standIns int // stand-in layers made (tests of this package do not run in parallel)

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// standInLayer makes an image on parent labelled as a package layer whose
// lineage installed reqs, and removes it when the test ends (unless gone).
func standInLayer(t *testing.T, eng *engine.Client, parent string, reqs ...string) string {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	df := "FROM " + parent + "\n"
	if err := tw.WriteHeader(&tar.Header{Name: "Dockerfile", Mode: 0o644, Size: int64(len(df))}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write([]byte(df)); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	standIns++
	tag := fmt.Sprintf("pybox-test-bench-layer-%d:%d", os.Getpid(), standIns)
	labels := map[string]string{contract.LabelManaged: "image", contract.LabelRole: "package-layer",
		images.LabelRequirements: string(must(json.Marshal(reqs)))}
	if err := eng.BuildImage(t.Context(), &buf, "Dockerfile", tag, nil, labels, nil); err != nil {
		t.Fatalf("build %s: %v", tag, err)
	}
	img, found, err := eng.InspectImage(t.Context(), tag)
	if err != nil || !found {
		t.Fatalf("inspect %s: found=%v err=%v", tag, found, err)
	}
	t.Cleanup(func() {
		if err := eng.RemoveImage(context.Background(), img.ID); err != nil {
			t.Errorf("remove %s: %v", img.ID, err)
		}
	})
	return img.ID
}
