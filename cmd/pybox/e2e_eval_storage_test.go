//go:build linux

package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/pybox-dev/pybox/internal/testenv"
)

// TestEvalOpensNoStorage: `pybox eval` keeps its workspaces in memory (a
// tmpfs per container), so it opens no code storage, no run output
// folders and no quota filesystem, whatever PYBOX_QUOTA_MODE says: after
// a batch, the code-storage folder does not exist, the state folder holds
// only the leases (owners/), and no loop device or mount names either.
func TestEvalOpensNoStorage(t *testing.T) {
	testenv.RuntimeImage(t, testenv.Docker(t), "base")
	for _, mode := range []string{"auto", "filesystem"} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			state, code := filepath.Join(dir, "state"), filepath.Join(dir, "code")
			probs, samples := filepath.Join(dir, "problems.jsonl"), filepath.Join(dir, "samples.jsonl")
			writeJSONL(t, probs, []map[string]any{{"task_id": "T/0", "prompt": "def f():\n", "entry_point": "f", "test": "def check(c):\n    assert c() == 1\n"}})
			writeJSONL(t, samples, []map[string]any{{"task_id": "T/0", "completion": "    return 1\n"}})
			_, stderr, rc := runEvalEnv(t, []string{"PYBOX_STATE_DIR=" + state, "CODE_STORAGE_DIR=" + code, "PYBOX_QUOTA_MODE=" + mode},
				"--progress=never", "--problems", probs, samples)
			if rc != 0 {
				t.Fatalf("exit %d\n%s", rc, stderr)
			}
			if got := readJSONL(t, samples+"_results.jsonl"); len(got) != 1 || got[0]["passed"] != true {
				t.Fatalf("results: %v", got)
			}
			if _, err := os.Stat(code); !os.IsNotExist(err) {
				t.Errorf("the code-storage folder was made or opened (stat: %v)", err)
			}
			var names []string
			entries, err := os.ReadDir(state)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				names = append(names, e.Name())
			}
			if !slices.Equal(names, []string{"owners"}) {
				t.Errorf("the state folder holds %v; want only the leases, [owners]", names)
			}
			if m := mountsUnder(t, dir); len(m) > 0 {
				t.Errorf("loop devices or mounts left under the test's folders: %v", m)
			}
		})
	}
}
