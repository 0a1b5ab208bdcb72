//go:build !windows

package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pybox-dev/pybox/internal/storage"
)

// fillWorkspace writes 8 MiB files into the folder it is given until it
// has written limitMiB (the old server let it finish: nothing stopped it).
const fillWorkspace = `import os
folder, limit = FOLDER, LIMIT
os.makedirs(folder, exist_ok=True)
chunk = b"x" * (8 << 20)
for i in range(limit // 8):
    with open(os.path.join(folder, "f%04d" % i), "wb") as f:
        f.write(chunk)
print("wrote everything")
`

func quotaProgram(folder string, limitMiB int) string {
	return strings.NewReplacer("FOLDER", fmt.Sprintf("%q", folder), "LIMIT", fmt.Sprint(limitMiB)).Replace(fillWorkspace)
}

func measured(t *testing.T, dir string) storage.Usage {
	t.Helper()
	u, err := storage.Measure(dir, storage.Usage{})
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// A program that fills the workspace is stopped while it runs, with a clear
// result, within a bounded overshoot; the workspace over its quota can only
// shrink; the file tools refuse to add to it; cleaning up makes room again.
func TestWorkspaceQuotaStopsAProgramThatFillsIt(t *testing.T) {
	parallelTest(t)
	eachRuntime(t, testWorkspaceQuotaStopsAProgramThatFillsIt)
}

func testWorkspaceQuotaStopsAProgramThatFillsIt(t *testing.T) {
	const quotaMiB = 48
	s := startServer(t, "PYBOX_WORKSPACE_QUOTA=48m")
	out, res := s.exec(map[string]any{"code": quotaProgram("fill", 1024), "timeout_s": 120})
	u := measured(t, s.storage)
	t.Logf("stopped after writing %d MiB into a workspace with a %d MiB quota", u.Bytes>>20, quotaMiB)
	if !out.QuotaExceeded || !res.IsError || out.TimedOut || strings.Contains(out.Stdout, "wrote everything") {
		t.Fatalf("quota_exceeded=%v is_error=%v timed_out=%v; want the program stopped for the quota\n%s", out.QuotaExceeded, res.IsError, out.TimedOut, text(res))
	}
	if !strings.Contains(text(res), "quota") {
		t.Fatalf("the result does not say why the program stopped:\n%s", text(res))
	}
	// The bound: the quota plus what a fast writer adds between two
	// measurements and the kill (generous: 2 shared cores).
	if u.Bytes > (quotaMiB+400)<<20 {
		t.Fatalf("the workspace grew to %d MiB; the quota is %d MiB", u.Bytes>>20, quotaMiB)
	}

	// Over its quota, the workspace can only shrink: a program that writes
	// more is stopped at once, one that does not runs.
	out, res = s.exec(map[string]any{"code": quotaProgram("more", 64)})
	if !out.QuotaExceeded {
		t.Fatalf("a program adding to a workspace over its quota ran on: %s", text(res))
	}
	if res := s.call("write_file", map[string]any{"path": "note.txt", "content": "hello"}); !res.IsError || !strings.Contains(text(res), "quota") {
		t.Fatalf("write_file into a workspace over its quota: %s", text(res))
	}
	out, res = s.exec(map[string]any{"code": "import shutil\nshutil.rmtree('fill'); shutil.rmtree('more', ignore_errors=True)\nprint('cleaned')"})
	if out.ExitCode != 0 || out.QuotaExceeded || !strings.Contains(out.Stdout, "cleaned") {
		t.Fatalf("a program that only deletes files: %s", text(res))
	}
	if res := s.call("write_file", map[string]any{"path": "note.txt", "content": "hello"}); res.IsError {
		t.Fatalf("write_file after the cleanup: %s", text(res))
	}
	out, res = s.exec(map[string]any{"code": quotaProgram("small", 16)})
	if out.ExitCode != 0 || out.QuotaExceeded {
		t.Fatalf("a program within the quota after the cleanup: %s", text(res))
	}
}

// The number of files is bounded too.
func TestWorkspaceQuotaBoundsTheNumberOfFiles(t *testing.T) {
	parallelTest(t)
	eachRuntime(t, testWorkspaceQuotaBoundsTheNumberOfFiles)
}

func testWorkspaceQuotaBoundsTheNumberOfFiles(t *testing.T) {
	s := startServer(t, "PYBOX_WORKSPACE_MAX_FILES=2000")
	code := "import os\nos.makedirs('many', exist_ok=True)\nfor i in range(200000):\n    open(f'many/{i}', 'w').close()\nprint('made them all')"
	out, res := s.exec(map[string]any{"code": code, "timeout_s": 120})
	u := measured(t, s.storage)
	t.Logf("stopped at %d entries with a quota of 2000", u.Files)
	if !out.QuotaExceeded || strings.Contains(out.Stdout, "made them all") || u.Files > 100_000 {
		t.Fatalf("quota_exceeded=%v, %d entries; want the program stopped near 2000\n%s", out.QuotaExceeded, u.Files, text(res))
	}
}

// A session's workspace is watched for the session's whole life: a thread
// a program leaves behind, filling the folder between calls, ends the
// session, and the next call says why.
func TestWorkspaceQuotaStopsASessionFillingItBetweenCalls(t *testing.T) {
	parallelTest(t)
	eachRuntime(t, testWorkspaceQuotaStopsASessionFillingItBetweenCalls)
}

func testWorkspaceQuotaStopsASessionFillingItBetweenCalls(t *testing.T) {
	s := startServer(t, "PYBOX_WORKSPACE_QUOTA=32m")
	code := "import threading, time\ndef fill():\n    chunk = b'x' * (4 << 20)\n    for i in range(256):\n        with open(f'bg{i}', 'wb') as f: f.write(chunk)\n        time.sleep(0.05)\nthreading.Thread(target=fill, daemon=True).start()\nprint('started')"
	out, res := s.exec(map[string]any{"code": code, "session_id": "filler"})
	if out.ExitCode != 0 && !out.QuotaExceeded {
		t.Fatalf("start the filler: %s", text(res))
	}
	dir := filepath.Join(s.state, "sessions", "filler")
	deadline := time.Now().Add(60 * time.Second)
	for s.container("") != nil && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	if left := s.containers(); len(left) > 0 {
		t.Fatalf("the session's container still runs while its thread fills the workspace: %v", left)
	}
	if u := measured(t, dir); u.Bytes > (32+400)<<20 {
		t.Fatalf("the session's folder grew to %d MiB; the quota is 32 MiB", u.Bytes>>20)
	}
	out, res = s.exec(map[string]any{"code": "print('again')", "session_id": "filler"})
	if !out.NewSession || !strings.Contains(text(res), "quota") {
		t.Fatalf("the next call does not say the session ended for the quota: %s", text(res))
	}
}
