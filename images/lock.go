package images

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// lockBuild takes an exclusive, cross-process lock for building variant, so
// two pybox processes (two servers, or parallel test packages) never build
// the same image at once. The lock dies with the process. It polls so that
// ctx can cancel the wait.
func lockBuild(ctx context.Context, variant string) (unlock func(), err error) {
	path := filepath.Join(os.TempDir(), fmt.Sprintf("pybox-build-%s-%d.lock", variant, os.Geteuid()))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("build lock: %w", err)
	}
	for {
		held, err := tryLock(f)
		if err == nil && !held {
			return func() { f.Close() }, nil // closing the file releases the lock
		}
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("build lock: %w", err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, context.Cause(ctx)
		case <-time.After(250 * time.Millisecond):
		}
	}
}
