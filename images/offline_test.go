//go:build linux

package images

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestOfflineFailureCleansUp: a debootstrap that fails (an unreachable
// mirror) or is cancelled, or an apt install in its root that is cancelled,
// leaves no directory and no mount behind, and the images stay as they
// were. The apt case needs a full debootstrap first, so it runs only with
// PYBOX_TEST_DATASCIENCE=1.
func TestOfflineFailureCleansUp(t *testing.T) {
	eng := requireDocker(t)
	if err := checkOffline(); err != nil {
		t.Skipf("offline build not possible here: %v", err)
	}
	machine := &Builder{} // the default tags, which the tests' builds must leave alone
	tests := []struct {
		name, variant, mirror, wantErr string
		cancelOn                       string // a progress line that starts the countdown to cancel
		cancelAfter                    time.Duration
		slow                           bool
	}{
		{"unreachable mirror", VariantBase, "http://127.0.0.1:9/debian",
			"debootstrap bookworm from http://127.0.0.1:9/debian", "", 0, false},
		{"cancelled", VariantBase, "", "context canceled", "pybox: debootstrap", 3 * time.Second, false},
		{"cancelled in apt", VariantDatascience, "", "apt-get install stopped: context canceled",
			"pybox: apt-get install", 5 * time.Second, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.slow && os.Getenv("PYBOX_TEST_DATASCIENCE") != "1" {
				t.Skip("set PYBOX_TEST_DATASCIENCE=1 to debootstrap and cancel the apt install")
			}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			b := freshBuilder(t, eng)
			b.TempDir, b.Mirror = t.TempDir(), tt.mirror
			if tt.cancelAfter > 0 {
				b.Progress = &onLine{w: b.Progress, substr: tt.cancelOn, fn: func() {
					time.AfterFunc(tt.cancelAfter, cancel)
				}}
			}
			before := imageIDs(t, b, machine.rootfsTag(tt.variant), Tag(tt.variant), b.rootfsTag(tt.variant), b.tag(tt.variant))
			_, err := b.Build(ctx, BuildOptions{Variant: tt.variant, Offline: true})
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
			if pids := rootedUnder(b.TempDir); len(pids) != 0 {
				t.Errorf("processes still chrooted in the temp dir: %v", pids)
			}
			after := imageIDs(t, b, machine.rootfsTag(tt.variant), Tag(tt.variant), b.rootfsTag(tt.variant), b.tag(tt.variant))
			if strings.Join(after, " ") != strings.Join(before, " ") {
				t.Errorf("images changed: %v -> %v", before, after)
			}
		})
	}
}

// rootedUnder lists the processes whose root directory is inside dir (a
// dpkg that outlived a cancelled build).
func rootedUnder(dir string) []string {
	roots, _ := filepath.Glob("/proc/[0-9]*/root") // the pattern is valid
	var pids []string
	for _, r := range roots {
		target, err := os.Readlink(r)
		if err == nil && strings.HasPrefix(target, dir+"/") {
			pids = append(pids, filepath.Base(filepath.Dir(r)))
		}
	}
	return pids
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
