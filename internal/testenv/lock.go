package testenv

import (
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// layerLock is this process's hold on the layer-cache lock file.
var layerLock struct {
	sync.Mutex
	holders int
	f       *os.File
}

// LockLayerCache holds, until t ends, a lock that every test which
// commits, removes or looks for package layers takes. The daemon's image
// cache is shared by every test process, and go test runs packages at
// once: without it one package's test saw another's freshly committed
// layer as its own (a refused install "committed" pyboxother), and a test
// removing the layers it made could remove a layer another process had
// just been handed from the cache (same key: same base, specs and
// wheelhouse). Within a process tests run one at a time, so the hold is
// counted: a test that starts two servers takes it once.
func LockLayerCache(t testing.TB) {
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
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
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
}
