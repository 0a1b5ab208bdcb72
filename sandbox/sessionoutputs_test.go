package sandbox_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pybox-dev/pybox/internal/testenv"
	"github.com/pybox-dev/pybox/sandbox"
)

// TestSessionCallOutputsArePrivate: each session call gets a fresh folder
// in the session's private output area, outside its workspace; the call's
// result hands it over (moved out of the area, where the container no
// longer reaches it); a folder the program swapped for a symlink is not
// followed; the area goes with the session.
func TestSessionCallOutputsArePrivate(t *testing.T) {
	for _, rt := range testenv.Runtimes(t, testenv.Docker(t)) {
		t.Run(testenv.RuntimeName(rt), func(t *testing.T) { testSessionCallOutputsArePrivate(t, rt) })
	}
}

func testSessionCallOutputsArePrivate(t *testing.T, runtime string) {
	runs := t.TempDir()
	sb, _ := newSandbox(t, sandbox.Config{RunsDir: runs, Runtime: runtime})
	ws := workspace(t, "")
	call := func(code string) sandbox.Result {
		t.Helper()
		res, err := sb.RunInSession(t.Context(), "outs", sandbox.SessionProgram{Workspace: ws, Code: code})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("%q: %+v %v", code, res, err)
		}
		return res
	}
	res := call("import os\nd = os.environ['PYBOX_OUTPUTS']\nprint(d)\nopen(d + '/made.txt', 'w').write('x')")
	if o := res.Outputs; o == nil || strings.TrimSpace(res.Stdout) != sandbox.SessionOutputsMount+"/"+o.Name {
		t.Fatalf("outputs %+v, the program saw %q", o, res.Stdout)
	}
	if b, err := os.ReadFile(filepath.Join(res.Outputs.Dir, "made.txt")); err != nil || string(b) != "x" {
		t.Fatalf("the call's file is not in the folder handed over: %q %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(ws, "outputs")); !os.IsNotExist(err) {
		t.Errorf("the call made outputs/ in the workspace: %v", err)
	}
	first := res.Outputs
	// The next call sees neither the earlier folder nor its file.
	res = call("import os\nprint(sorted(os.listdir('" + sandbox.SessionOutputsMount + "')) == [os.path.basename(os.environ['PYBOX_OUTPUTS'])])")
	if strings.TrimSpace(res.Stdout) != "True" || res.Outputs == nil || res.Outputs.Name == first.Name {
		t.Errorf("second call: %q %+v; want only its own fresh folder", res.Stdout, res.Outputs)
	}
	first.Remove()
	res.Outputs.Remove()
	// A folder swapped for a symlink is not handed over.
	res = call("import os\nd = os.environ['PYBOX_OUTPUTS']\nos.rmdir(d)\nos.symlink('/etc', d)")
	if res.Outputs != nil || res.OutputsNote == "" {
		t.Errorf("a symlinked folder: outputs %+v, note %q; want none, and a note", res.Outputs, res.OutputsNote)
	}
	if err := sb.CloseSession(t.Context(), "outs"); err != nil {
		t.Fatal(err)
	}
	areas, _ := filepath.Glob(filepath.Join(runs, "*", "s-*"))
	if len(areas) != 0 {
		t.Errorf("session output areas left after close: %v", areas)
	}
}
