package testenv

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pybox-dev/pybox/images"
	"github.com/pybox-dev/pybox/internal/engine"
)

// layerLock is this process's hold on the layer-cache lock file.
var layerLock struct {
	sync.Mutex
	holders int
	f       *os.File
}

// Layers is a test's hold on the daemon's package layers: the layers
// there were when it took the hold, which no other test process changes
// until the test ends.
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
// layer saw another's. Within a process tests run one at a time, so the
// hold is counted: a test that starts two servers takes it once.
func LockLayerCache(t testing.TB, eng *engine.Client) *Layers {
	t.Helper()
	layerLock.Lock()
	defer layerLock.Unlock()
	if layerLock.holders == 0 {
		path := filepath.Join(os.TempDir(), "pybox-test-layer-cache.lock")
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o666)
		if err != nil {
			t.Fatalf("layer-cache lock: %v", err)
		}
		start := time.Now()
		if err := lockExclusive(f); err != nil {
			f.Close()
			t.Fatalf("layer-cache lock %s: %v", path, err)
		}
		if waited := time.Since(start); waited > time.Second {
			t.Logf("waited %v for the layer-cache lock (another test process held it)", waited.Round(time.Millisecond))
		}
		layerLock.f = f
	}
	layerLock.holders++
	t.Cleanup(func() {
		layerLock.Lock()
		defer layerLock.Unlock()
		if layerLock.holders--; layerLock.holders == 0 {
			layerLock.f.Close() // closing the last descriptor releases the flock
			layerLock.f = nil
		}
	})
	l := &Layers{eng: eng, before: map[string]bool{}}
	for _, img := range l.list(t) {
		l.before[img.ID] = true
	}
	return l
}

func (l *Layers) list(t testing.TB) []engine.Image {
	t.Helper()
	list, err := l.eng.ListImages(context.Background(), "pybox.managed", "image")
	if err != nil {
		t.Fatalf("list package layers: %v", err)
	}
	return list
}

// New lists the package layers made since the hold was taken.
func (l *Layers) New(t testing.TB) []engine.Image {
	t.Helper()
	var made []engine.Image
	for _, img := range l.list(t) {
		if !l.before[img.ID] {
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
		if strings.Contains(img.Labels[images.LabelRequirements], `"`+pkg) {
			t.Errorf("a layer with %s was committed: %s %v", pkg, img.ID, img.Tags)
		}
	}
}

// RemoveNew removes the layers made since the hold was taken (a layer
// with children goes after them).
func (l *Layers) RemoveNew(t testing.TB) {
	t.Helper()
	var errs []string
	for range 3 {
		errs = errs[:0]
		for _, img := range l.New(t) {
			if err := l.eng.RemoveImage(context.Background(), img.ID); err != nil {
				errs = append(errs, err.Error())
			}
		}
		if len(errs) == 0 {
			return
		}
	}
	t.Logf("test layers left: %s", strings.Join(errs, "; "))
}
