//go:build !windows

package main

import (
	"encoding/json"
	"fmt"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pybox-dev/pybox/tools"
)

// sparseOutputs leaves a small file and eight sparse files of 200 MiB
// apparent size (almost no disk) in the run's output folder. The old
// server copied them back densely into code storage, with no quota check:
// 1.6 GiB on the host per call, against a 32 MiB quota.
const sparseOutputs = `import os
out = os.environ["PYBOX_OUTPUTS"]
with open(os.path.join(out, "kept.txt"), "w") as f:
    f.write("small and kept")
for i in range(8):
    with open(os.path.join(out, "sparse%d.bin" % i), "wb") as f:
        f.truncate(200 << 20)
print("made")
`

// What a run's program leaves in its output folder is counted against the
// workspace's quota as it is copied back: code storage stays within its
// quota (apparent and allocated size), the result names the files that
// were not saved, and the server still serves. (Beside the parallel tests
// its first call once listed no saved file: the account recorded a
// measurement that began before the run's folder was handed over, so
// counted its 1.6 GiB, and the copy-back judged by it; see
// TestAccountHandOverDuringAMeasurement.)
func TestOutputsCopyBackStaysWithinTheQuota(t *testing.T) {
	parallelTest(t)
	const quota = 32 << 20
	s := startServer(t, "PYBOX_WORKSPACE_QUOTA=32m", "PYBOX_WARM_POOL=0")
	for call := range 2 {
		out, res := s.exec(map[string]any{"code": sparseOutputs})
		u := measured(t, s.storage)
		t.Logf("call %d: code storage holds %d MiB (apparent or allocated, whichever is more) in %d entries", call, u.Bytes>>20, u.Files)
		if u.Bytes > quota {
			t.Fatalf("call %d: code storage holds %d MiB after the copy-back; the quota is %d MiB\n%s", call, u.Bytes>>20, quota>>20, text(res))
		}
		if !strings.Contains(text(res), "not saved") || !strings.Contains(text(res), "sparse") {
			t.Fatalf("call %d: the result does not say which output files were not saved:\n%s", call, text(res))
		}
		for _, a := range out.Artifacts {
			if strings.Contains(a.Path, "sparse") && a.Bytes > 0 { // one the quota stop cut short may be empty
				t.Errorf("call %d: %s (%d bytes) listed as saved", call, a.Path, a.Bytes)
			}
		}
		if len(out.Artifacts) == 0 || path.Base(out.Artifacts[0].Path) != "kept.txt" {
			t.Errorf("call %d: kept.txt, within the quota, was not saved: %+v", call, out.Artifacts)
		}
		if len(out.NotSaved) == 0 {
			t.Errorf("call %d: not_saved is empty: %+v", call, out)
		}
	}
	if out, res := s.exec(map[string]any{"code": "print('still serving')"}); out.ExitCode != 0 || out.Stdout != "still serving\n" {
		t.Fatalf("the server after the floods: %s", text(res))
	}
}

// plantEverywhere, run in connection A's session, starts a thread that
// writes a PNG figure and a file into every folder under outputs/ of the
// shared code storage, as fast as it can, for a bounded time.
const plantEverywhere = `import os, threading, time
PNG = b"\x89PNG\r\n\x1a\n" + b"planted by A" * 10
def plant():
    end = time.time() + SECONDS
    while time.time() < end:
        try:
            names = os.listdir("/workspace/outputs")
        except OSError:
            names = []
        for n in names:
            d = os.path.join("/workspace/outputs", n)
            for name, data in (("figure-planted.png", PNG), ("planted.txt", b"from A")):
                try:
                    with open(os.path.join(d, name), "wb") as f:
                        f.write(data)
                except OSError:
                    pass
        time.sleep(0.002)
threading.Thread(target=plant, daemon=True).start()
print("planting")
`

// ownOutput writes one file into the call's own output folder, then
// stays long enough for a planter to find the folder.
const ownOutput = `import os, time
with open(os.path.join(os.environ["PYBOX_OUTPUTS"], "mine.txt"), "w") as f:
    f.write("from B")
time.sleep(0.4)
print("done")
`

// With the mcp-executor tool set, sessions work in the shared code
// storage; still, one connection's results list only what its own program
// made: another connection planting into every outputs/ folder gets
// nothing into them. (The old server listed each turn's outputs folder in
// place, in code storage, and B got A's PNG and file as its own.)
func TestSessionOutputsAreTheTurnsOwn(t *testing.T) {
	parallelTest(t)
	eachRuntime(t, testSessionOutputsAreTheTurnsOwn)
}

func testSessionOutputsAreTheTurnsOwn(t *testing.T) {
	env := []string{"PYBOX_TOOLSET=mcp-executor", "PYBOX_WARM_POOL=0"}
	if rt := serverRuntime(t); rt != "" {
		env = append(env, "PYBOX_RUNTIME="+rt)
	}
	h := startHTTP(t, false, env...)
	a, b := h.connect(tokenA), h.connect(tokenA) // one tenant, two connections
	if res, out := callOK(t, a, "execute_python", map[string]any{"code": strings.Replace(plantEverywhere, "SECONDS", "30", 1)}); res.IsError || !strings.Contains(out, "planting") {
		t.Fatalf("connection A: %s", out)
	}
	var last string // B's last saved file, in code storage
	for i := range 5 {
		res, out := callOK(t, b, "execute_python", map[string]any{"code": ownOutput})
		if res.IsError || !strings.Contains(out, "done") {
			t.Fatalf("connection B, call %d: %s", i, out)
		}
		var got tools.ExecutionOutput
		raw, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(raw, &got); err != nil {
			t.Fatal(err)
		}
		if err := onlyOwn(res, got); err != nil {
			t.Fatalf("connection B, call %d: %v\n%s", i, err, out)
		}
		last = got.Artifacts[0].Path
	}
	// A's planter was at work all along: the folder B's files were saved
	// in, in the shared code storage, gets A's files too (after B's result).
	waitForFile(t, filepath.Join(h.storage, "tenants", "a", path.Dir(last), "planted.txt"))
}

// onlyOwn fails unless the result lists mine.txt alone and no image.
func onlyOwn(res *mcp.CallToolResult, out tools.ExecutionOutput) error {
	for _, c := range res.Content {
		if _, ok := c.(*mcp.ImageContent); ok {
			return fmt.Errorf("the result carries an image the program did not make")
		}
	}
	var names []string
	for _, a := range out.Artifacts {
		names = append(names, path.Base(a.Path))
	}
	if len(names) != 1 || names[0] != "mine.txt" {
		return fmt.Errorf("artifacts %v; want only mine.txt", names)
	}
	return nil
}
