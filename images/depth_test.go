package images_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/pybox-dev/pybox/images"
	"github.com/pybox-dev/pybox/internal/engine"
	"github.com/pybox-dev/pybox/internal/testenv"
)

// testOwner labels containers as pybox's own, owned by this (live) test
// process, so no reaper takes them and leftovers can be found by owner.
type testOwner struct {
	id  string
	seq atomic.Int64
}

func newTestOwner(t *testing.T) *testOwner {
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return &testOwner{id: "test" + hex.EncodeToString(b)}
}

func (o *testOwner) Labels(role string) map[string]string {
	host, _ := os.Hostname() // an empty host only makes reapers leave the container alone
	return map[string]string{"pybox.managed": "true", "pybox.owner": o.id, "pybox.host": host,
		"pybox.pid": strconv.Itoa(os.Getpid()), "pybox.role": role}
}

func (o *testOwner) ContainerName(role string) string {
	return fmt.Sprintf("pybox-%s-%s-%d", role, o.id, o.seq.Add(1))
}

// TestInstallDepthRebuildsFromBase: with MaxDepth 2 the third install does
// not stack a third layer but rebuilds one layer with every requirement
// directly on the base image, and that image has all three packages.
func TestInstallDepthRebuildsFromBase(t *testing.T) {
	eng := testenv.Docker(t)
	testenv.LockLayerCache(t, eng)
	base := inspect(t, eng, testenv.RuntimeImage(t, eng, images.VariantBase))
	owner := newTestOwner(t)
	in := &images.Installer{Engine: eng, Owner: owner, MaxDepth: 2,
		Index: images.Index{Wheelhouse: testenv.Wheelhouse(t), Network: "none"}}
	env, err := images.Environment{}.Normalize()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if left := testenv.Managed(t, eng, map[string]string{"pybox.owner": owner.id}); len(left) > 0 {
			t.Errorf("install containers left behind: %v", left)
		}
	})
	steps := []struct {
		spec   string
		depth  int
		reqs   []string
		parent string // image ID the layer was committed on; "" = the previous step's
		layers int    // filesystem layers above the base image
	}{
		{"pyboxbase==1.0", 1, []string{"pyboxbase==1.0"}, base.ID, 1},
		{"pyboxdemo", 2, []string{"pyboxbase==1.0", "pyboxdemo"}, "", 2},
		{"pyboxother", 1, []string{"pyboxbase==1.0", "pyboxdemo", "pyboxother"}, base.ID, 1},
	}
	prev := base.ID
	for _, st := range steps {
		res, err := in.Install(t.Context(), env, []string{st.spec})
		if err != nil {
			t.Fatalf("install %s: %v\n%s", st.spec, err, res.Output)
		}
		removeAtCleanup(t, eng, res.Env.ImageID)
		img := inspect(t, eng, res.Env.ImageID)
		parent := st.parent
		if parent == "" {
			parent = prev
		}
		got := fmt.Sprintf("depth %d (label %s) reqs %v parent %s layers +%d cached %v", res.Env.Depth,
			img.Labels[images.LabelDepth], res.Env.Requirements, img.Labels[ocispec.AnnotationBaseImageDigest], img.Layers-base.Layers, res.Cached)
		want := fmt.Sprintf("depth %d (label %d) reqs %v parent %s layers +%d cached false", st.depth, st.depth, st.reqs, parent, st.layers)
		if got != want {
			t.Errorf("after installing %s:\n got %s\nwant %s", st.spec, got, want)
		}
		env, prev = res.Env, res.Env.ImageID
	}
	const check = "import pyboxbase, pyboxdemo, pyboxother; print(pyboxbase.VERSION, pyboxdemo.answer(), pyboxother.VERSION)"
	if out := runPython(t, eng, owner, env.ImageID, check); out != "1.0 42 1.0\n" {
		t.Errorf("the rebuilt layer imports: %q; want %q", out, "1.0 42 1.0\n")
	}
}

func inspect(t *testing.T, eng *engine.Client, ref string) engine.Image {
	t.Helper()
	img, found, err := eng.InspectImage(t.Context(), ref)
	if err != nil || !found {
		t.Fatalf("inspect %s: found=%v err=%v", ref, found, err)
	}
	return img
}

// removeAtCleanup removes image id when the test ends (children first:
// cleanups run last-in first-out).
func removeAtCleanup(t *testing.T, eng *engine.Client, id string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := eng.RemoveImage(ctx, id); err != nil {
			t.Errorf("removing test layer %s: %v", id, err)
		}
	})
}

// runPython runs code with the runtime venv's python in image as the
// sandbox user with no network and returns stdout; a failure fails the test.
func runPython(t *testing.T, eng *engine.Client, owner images.Owner, image, code string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	exit, err := eng.Run(t.Context(), engine.Spec{
		Name: owner.ContainerName("check"),
		Config: &container.Config{Image: image, User: images.SandboxUser, Labels: owner.Labels("check"),
			Cmd: []string{images.VenvPython, "-c", code}, NetworkDisabled: true},
		Host:   &container.HostConfig{NetworkMode: "none", CapDrop: []string{"ALL"}},
		Stdout: &stdout, Stderr: &stderr, Timeout: time.Minute,
	})
	if err != nil || exit.Code != 0 {
		t.Fatalf("python in %s: exit %d err %v\nstderr: %s", image, exit.Code, err, stderr.String())
	}
	return stdout.String()
}
