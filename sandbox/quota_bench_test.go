package sandbox_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pybox-dev/pybox/internal/testenv"
	"github.com/pybox-dev/pybox/sandbox"
)

// BenchmarkRunAfterLeftEntries measures a trivial run on a workspace in
// which an earlier run left 250,000 entries (outputs/junk; the entry
// quota raised so that they are within it), against the same run on an
// empty workspace: the quota's accounting must not cost each run in
// proportion to what was left.
func BenchmarkRunAfterLeftEntries(b *testing.B) {
	for _, left := range []int{0, 250_000} {
		b.Run(fmt.Sprintf("left=%d", left), func(b *testing.B) {
			ws := b.TempDir()
			if err := os.WriteFile(filepath.Join(ws, "main.py"), []byte("print(1)\n"), 0o644); err != nil {
				b.Fatal(err)
			}
			junk := filepath.Join(ws, "outputs", "junk")
			if err := os.MkdirAll(junk, 0o755); err != nil {
				b.Fatal(err)
			}
			for i := range left {
				if err := os.WriteFile(filepath.Join(junk, fmt.Sprint(i)), nil, 0o644); err != nil {
					b.Fatal(err)
				}
			}
			eng := testenv.Docker(b)
			sb, err := sandbox.New(sandbox.Config{Engine: eng, Image: testenv.RuntimeImage(b, eng, "base"), RunsDir: b.TempDir(),
				StorageDirs: []string{ws}, Limits: sandbox.Limits{WorkspaceFiles: 1_000_000}})
			if err != nil {
				b.Fatal(err)
			}
			defer sb.Close()
			var cpu time.Duration
			b.ResetTimer()
			for b.Loop() {
				before := processCPU()
				res, err := sb.Run(context.Background(), sandbox.Program{Workspace: ws, File: "main.py"})
				if err != nil || res.ExitCode != 0 {
					b.Fatalf("run: %v %+v", err, res)
				}
				cpu += processCPU() - before
			}
			b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/run")
			b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "server-cpu-ms/run")
		})
	}
}
