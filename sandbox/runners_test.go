package sandbox

import (
	"bytes"
	"compress/zlib"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/pybox-dev/pybox/images"
	"github.com/pybox-dev/pybox/internal/testenv"
)

// TestRunnerCompiledOnce: the first container of an image named by its ID
// is asked for the runner its interpreter compiled and sends it with its
// ready frame; the next containers of that image start from it (and run
// programs as before). An image named by a tag (which may move to another
// Python) is never asked.
func TestRunnerCompiledOnce(t *testing.T) {
	eng := testenv.Docker(t)
	tag := testenv.RuntimeImage(t, eng, "base")
	img, found, err := eng.InspectImage(t.Context(), tag)
	if err != nil || !found {
		t.Fatalf("inspect %s: %v", tag, err)
	}
	sb, err := New(Config{Engine: eng, Image: tag, RunsDir: t.TempDir(), WarmPool: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	code := "import sys; print('ran', sys.argv[0])"
	run := func(image string) {
		t.Helper()
		res, err := sb.Run(t.Context(), Program{Image: image, File: "main.py", Source: &code})
		if err != nil || res.ExitCode != 0 || res.Stdout != "ran /workspace/main.py\n" {
			t.Fatalf("run in %s: %v, exit %d, stdout %q, stderr %q", image, err, res.ExitCode, res.Stdout, res.Stderr)
		}
	}
	kind := func(image string) (byte, string) {
		p := sb.plan(Program{Image: image}, "once")
		return p.Runner[0], p.LearnRunner
	}
	if k, learn := kind(img.ID); k != 's' || learn == "" {
		t.Fatalf("before any run: runner frame %q, learning %q; want the source, asking for the compiled code", k, learn)
	}
	run(img.ID)
	if k, learn := kind(img.ID); k != 'M' || learn != "" {
		t.Fatalf("after a run: runner frame %q, learning %q; want the compiled code", k, learn)
	}
	run(img.ID) // from the compiled runner
	run(img.ID)
	run(tag)
	if k, learn := kind(tag); k != 'S' || learn != "" {
		t.Errorf("image by tag: runner frame %q, learning %q; want the source, asking nothing", k, learn)
	}
}

// TestRunnerCacheRefusesGarbage: a ready frame's payload that is not zlib
// of a bounded size is not kept; the cache holds at most maxRunners.
func TestRunnerCacheRefusesGarbage(t *testing.T) {
	var rc runnerCache
	log := slog.New(slog.DiscardHandler)
	py := []string{"/opt/venv/bin/python"}
	id := "sha256:" + strings.Repeat("a", 64)
	_, key := rc.frame(id, py)
	rc.learn(key, []byte("import os; os.system('x')"), log)
	if f, learn := rc.frame(id, py); f[0] != 's' || learn != key {
		t.Errorf("garbage was kept: frame %q", f[:min(len(f), 20)])
	}
	var z bytes.Buffer
	w := zlib.NewWriter(&z)
	w.Write([]byte("marshal data"))
	w.Close()
	for i := range maxRunners + 3 {
		_, key := rc.frame(fmt.Sprintf("sha256:%064x", i+1), py)
		rc.learn(key, z.Bytes(), log)
	}
	if n := len(rc.frames); n != maxRunners {
		t.Errorf("%d runners kept; want at most %d", n, maxRunners)
	}
	if f, _ := rc.frame("pybox-runtime:base", py); !bytes.Equal(f, images.RunnerFrame(false)) {
		t.Error("an image by tag got a frame that asks for the compiled code")
	}
	// Only an image named for good: a prefix of an ID may come to match another image.
	for ref, want := range map[string]bool{"sha256:aa": false, id[:20]: false, "python@" + id: true, "python:3.12@" + id: true, id: true} {
		if _, learn := rc.frame(ref, py); (learn != "") != want {
			t.Errorf("%s: asked for the compiled runner %v; want %v", ref, learn != "", want)
		}
	}
}
