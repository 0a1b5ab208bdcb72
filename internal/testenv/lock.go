package testenv

import (
	"context"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pybox-dev/pybox/images"
	"github.com/pybox-dev/pybox/internal/engine"
)

// layerLock is this process's hold on the layer-cache lock file, by one
// top-level test at a time (turn has room for one).
var layerLock struct {
	sync.Mutex
	owner   string // the top-level test holding it
	holders int
	f       *os.File
	since   time.Time // taken
}

var layerTurn = make(chan struct{}, 1)

// privateLayer matches the requirement label of a layer whose lineage
// installed a package no other test installs: a pybox bench's (named by
// internal/bench's packagePrefix: pyboxbench, nine digits, x) or a test's
// own (OwnPackage: pyboxown, nine digits, x).
var privateLayer = regexp.MustCompile(`"pybox(bench|own)[0-9]{9}x[0-9]`)

// OwnPackage returns the name of a package of t's own, and a wheelhouse
// holding only it (1.0, whose answer() returns 42). Its layers' keys are
// t's alone, so t may install it without the layer-cache lock: no other
// test is handed its layers from the cache, none counts or removes them
// (Layers.New leaves them out), and t removes them when it ends, after
// its servers (RemoveLayersWith, registered here first).
func OwnPackage(t testing.TB, eng *engine.Client) (name, wheelhouse string) {
	t.Helper()
	name = fmt.Sprintf("pyboxown%09dx1", mrand.IntN(1e9))
	wheelhouse = t.TempDir()
	if err := os.Chmod(wheelhouse, 0o755); err != nil {
		t.Fatal(err)
	}
	WriteWheel(t, wheelhouse, Wheel{Name: name, Version: "1.0", Code: "VERSION = '1.0'\ndef answer():\n    return 42\n"})
	t.Cleanup(func() { RemoveLayersWith(t, eng, name) })
	return name, wheelhouse
}

// RemoveLayersWith removes the package layers whose lineage installed pkg
// (a layer with children goes after them).
func RemoveLayersWith(t testing.TB, eng *engine.Client, pkg string) {
	t.Helper()
	left := removeLayers(eng, func() []engine.Image {
		var with []engine.Image
		for _, img := range listLayers(t, eng) {
			if installed(img, pkg) {
				with = append(with, img)
			}
		}
		return with
	})
	if len(left) > 0 {
		t.Logf("layers of %s left: %s", pkg, strings.Join(left, "; "))
	}
}

// removeLayers removes the layers pick lists, in a few passes (a layer
// with children goes after them), and returns why those left could not go.
func removeLayers(eng *engine.Client, pick func() []engine.Image) []string {
	var errs []string
	for range 3 {
		errs = errs[:0]
		for _, img := range pick() {
			if err := eng.RemoveImage(context.Background(), img.ID); err != nil {
				errs = append(errs, err.Error())
			}
		}
		if len(errs) == 0 {
			break
		}
	}
	return errs
}

// listLayers lists the daemon's package layers.
func listLayers(t testing.TB, eng *engine.Client) []engine.Image {
	t.Helper()
	list, err := eng.ListImages(context.Background(), "pybox.managed", "image")
	if err != nil {
		t.Fatalf("list package layers: %v", err)
	}
	return list
}

// installed reports whether layer img's lineage lists a requirement named pkg.
func installed(img engine.Image, pkg string) bool {
	return strings.Contains(img.Labels[images.LabelRequirements], `"`+pkg)
}

// Layers is a test's hold on the daemon's package layers: the layers
// there were when it took the hold, which no other test changes until the
// test ends.
type Layers struct {
	eng    *engine.Client
	before map[string]bool
}

// LockLayerCache holds, until t ends, a lock that every test which
// commits, removes or looks for package layers takes, and lists the layers
// there are. The daemon's image cache is shared by every test process, and
// go test runs packages at once: without it a test removing the layers it
// made could remove a layer another process had just been handed from the
// cache (same key: same base, specs and wheelhouse), and one looking for a
// layer saw another's. Within a process the hold is one top-level test's
// at a time (tests may run in parallel), counted: a test that starts two
// servers, or whose subtests take it too, holds it once.
func LockLayerCache(t testing.TB, eng *engine.Client) *Layers {
	t.Helper()
	acquireLayerLock(t)
	t.Cleanup(func() {
		if held := releaseLayerLock(); held > time.Second {
			t.Logf("held the layer-cache lock %v", held.Round(time.Millisecond))
		}
	})
	l := &Layers{eng: eng, before: map[string]bool{}}
	for _, img := range listLayers(t, l.eng) {
		l.before[img.ID] = true
	}
	return l
}

// acquireLayerLock waits for this process's turn (unless t's top-level
// test holds it already), then for the lock file.
func acquireLayerLock(t testing.TB) {
	t.Helper()
	test, _, _ := strings.Cut(t.Name(), "/")
	layerLock.Lock()
	if layerLock.holders > 0 && layerLock.owner == test {
		layerLock.holders++
		layerLock.Unlock()
		return
	}
	layerLock.Unlock()
	start := time.Now()
	layerTurn <- struct{}{} // another top-level test of this process holds it until its end
	f, err := lockLayerFile()
	if err != nil {
		<-layerTurn
		t.Fatalf("layer-cache lock: %v", err)
	}
	if waited := time.Since(start); waited > time.Second {
		t.Logf("waited %v for the layer-cache lock (another test held it)", waited.Round(time.Millisecond))
	}
	layerLock.Lock()
	layerLock.owner, layerLock.holders, layerLock.f, layerLock.since = test, 1, f, time.Now()
	layerLock.Unlock()
}

// lockLayerFile takes the lock file shared by the test processes.
func lockLayerFile() (*os.File, error) {
	path := filepath.Join(os.TempDir(), "pybox-test-layer-cache.lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		return nil, err
	}
	if err := lockExclusive(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

// releaseLayerLock drops one hold; on the last it releases the lock and
// says how long it was held (0 otherwise).
func releaseLayerLock() time.Duration {
	layerLock.Lock()
	defer layerLock.Unlock()
	if layerLock.holders--; layerLock.holders > 0 {
		return 0
	}
	layerLock.f.Close() // closing the last descriptor releases the flock
	layerLock.f, layerLock.owner = nil, ""
	<-layerTurn
	return time.Since(layerLock.since)
}

// New lists the package layers made since the hold was taken, except
// those of a pybox bench or a test's OwnPackage: they run beside the
// lock's holder, install only packages of their own (keys no test shares)
// and remove only their own layers when they end, so a test neither
// counts nor removes them.
func (l *Layers) New(t testing.TB) []engine.Image {
	t.Helper()
	var made []engine.Image
	for _, img := range listLayers(t, l.eng) {
		if !l.before[img.ID] && !privateLayer.MatchString(img.Labels[images.LabelRequirements]) {
			made = append(made, img)
		}
	}
	return made
}

// NoneWith fails t if a layer made since the hold was taken lists a
// requirement named pkg. (Layers from before it, such as one an
// interrupted earlier run left, are not the test's doing.)
func (l *Layers) NoneWith(t testing.TB, pkg string) {
	t.Helper()
	for _, img := range l.New(t) {
		if installed(img, pkg) {
			t.Errorf("a layer with %s was committed: %s %v", pkg, img.ID, img.Tags)
		}
	}
}

// RemoveNew removes the layers made since the hold was taken (a layer
// with children goes after them).
func (l *Layers) RemoveNew(t testing.TB) {
	t.Helper()
	if left := removeLayers(l.eng, func() []engine.Image { return l.New(t) }); len(left) > 0 {
		t.Logf("test layers left: %s", strings.Join(left, "; "))
	}
}
