package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// fatalRecorder stands for a test whose Fatalf is the subject.
type fatalRecorder struct {
	testing.TB
	fatal string
}

func (f *fatalRecorder) Helper()             {}
func (f *fatalRecorder) Logf(string, ...any) {}
func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// TestWaitKubeBuild: a test that needs the Kubernetes binaries waits until
// the background build writes its end, and fails, naming its log, when
// the build failed.
func TestWaitKubeBuild(t *testing.T) {
	for _, end := range []string{"ok", "failed"} {
		t.Run(end, func(t *testing.T) {
			t.Parallel()
			status := filepath.Join(t.TempDir(), "build")
			os.WriteFile(status, nil, 0o644) // under way
			rec := &fatalRecorder{TB: t}
			done := make(chan struct{})
			go func() { defer close(done); waitBuildStatus(rec, status) }()
			select {
			case <-done:
				t.Fatal("returned while the build was under way")
			case <-time.After(500 * time.Millisecond): // several looks at the file
			}
			os.WriteFile(status, []byte(end+"\n"), 0o644)
			select {
			case <-done:
			case <-time.After(time.Minute):
				t.Fatal("waitKubeBuild did not return a minute after the build ended")
			}
			if got := rec.fatal != ""; got != (end == "failed") {
				t.Errorf("build %s: fatal %q", end, rec.fatal)
			}
			if end == "failed" && !strings.Contains(rec.fatal, status+".log") {
				t.Errorf("the failure does not name the build's log: %q", rec.fatal)
			}
		})
	}
}
