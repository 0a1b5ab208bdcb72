//go:build linux

package images

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestOfflineFailureCleansUp: a debootstrap that fails (an unreachable
// mirror) or is cancelled leaves no directory and no mount behind, and the
// images stay as they were.
func TestOfflineFailureCleansUp(t *testing.T) {
	eng := requireDocker(t)
	if err := checkOffline(); err != nil {
		t.Skipf("offline build not possible here: %v", err)
	}
	tests := []struct {
		name, mirror, wantErr string
		cancelAfter           time.Duration
	}{
		{"unreachable mirror", "http://127.0.0.1:9/debian", "debootstrap bookworm from http://127.0.0.1:9/debian", 0},
		{"cancelled", "", "context canceled", 3 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			b, _ := testBuilder(t, eng)
			b.TempDir, b.Mirror = t.TempDir(), tt.mirror
			if tt.cancelAfter > 0 {
				b.Progress = &onLine{w: b.Progress, substr: "pybox: debootstrap", fn: func() {
					time.AfterFunc(tt.cancelAfter, cancel)
				}}
			}
			before := imageIDs(t, b, rootfsTag(VariantBase), Tag(VariantBase))
			_, err := b.Build(ctx, BuildOptions{Variant: "base", Offline: true})
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Build error = %v, want one containing %q", err, tt.wantErr)
			}
			entries, rerr := os.ReadDir(b.TempDir)
			if rerr != nil || len(entries) != 0 {
				t.Errorf("temp dir holds %v (err %v), want it empty", entries, rerr)
			}
			if mounts, _ := mountsUnder(b.TempDir); len(mounts) != 0 {
				t.Errorf("mounts left: %v", mounts)
			}
			after := imageIDs(t, b, rootfsTag(VariantBase), Tag(VariantBase))
			if strings.Join(after, " ") != strings.Join(before, " ") {
				t.Errorf("images changed: %v -> %v", before, after)
			}
		})
	}
}

func imageIDs(t *testing.T, b *Builder, refs ...string) []string {
	t.Helper()
	var ids []string
	for _, ref := range refs {
		img, _, err := b.Engine.InspectImage(context.Background(), ref)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, img.ID)
	}
	return ids
}

// onLine calls fn once, when a write contains substr.
type onLine struct {
	w      interface{ Write([]byte) (int, error) }
	substr string
	fn     func()
	once   sync.Once
}

func (o *onLine) Write(p []byte) (int, error) {
	if strings.Contains(string(p), o.substr) {
		o.once.Do(o.fn)
	}
	return o.w.Write(p)
}
