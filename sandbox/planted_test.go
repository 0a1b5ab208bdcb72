package sandbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pybox-dev/pybox/internal/testenv"
	"github.com/pybox-dev/pybox/sandbox"
)

// plantedMark is what a planted module writes on stderr when it runs.
const plantedMark = "PLANTED-MODULE-RAN"

// echoTools is a downstream with one tool, s.echo, that returns its
// arguments; any other tool fails.
type echoTools struct{}

func (echoTools) Names() []string { return []string{"s.echo"} }

func (echoTools) Call(_ context.Context, name string, args json.RawMessage) (any, error) {
	if name != "s.echo" {
		return nil, errors.New("no such tool")
	}
	return args, nil
}

// plantStdlib writes into ws a module for every name of the standard
// library that the runner's worker has not imported when a program
// starts (listed by a program run in image), each writing plantedMark on
// stderr when it runs: what an earlier run of the same code storage can
// leave there. It returns the names.
func plantStdlib(t *testing.T, sb *sandbox.Sandbox, image, ws string) []string {
	t.Helper()
	list := "import sys, json\nprint(json.dumps(sorted(sys.stdlib_module_names - set(sys.modules))))\n"
	if err := os.WriteFile(filepath.Join(ws, "list_names.py"), []byte(list), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := sb.Run(t.Context(), sandbox.Program{Image: image, Workspace: ws, File: "list_names.py"})
	var names []string
	if err != nil || res.ExitCode != 0 || json.Unmarshal([]byte(res.Stdout), &names) != nil || len(names) < 100 {
		t.Fatalf("listing the stdlib names: %+v, %v", res, err)
	}
	for _, n := range names {
		src := fmt.Sprintf("import os\nos.write(2, b'\\n%s %s\\n')\n", plantedMark, n)
		if err := os.WriteFile(filepath.Join(ws, n+".py"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return names
}

// plantedCase is a program that imports nothing itself (or only with its
// own folder off sys.path) and makes the runner work for it.
type plantedCase struct {
	name, code string
	test       *string
	tools      sandbox.ToolCalls
	exit       int
	stderr     string // a substring stderr must have: the program did run
}

var plantedCases = []plantedCase{
	{name: "raise", code: "def f():\n    return {'a': 1}['a'] / 0\nf()\n", exit: 1, stderr: "ZeroDivisionError"},
	{name: "raise wide", code: "d = {'é': 1}\nx = d['é'] + d['ü✓']\n", exit: 1, stderr: "KeyError"},
	{name: "raise chained", code: "try:\n    1/0\nexcept Exception as e:\n    e.add_note('note ✓')\n    raise ValueError('v') from e\n", exit: 1, stderr: "note ✓"},
	{name: "syntax error", code: "x = (\n", exit: 1, stderr: "SyntaxError"},
	{name: "interrupt", code: "raise KeyboardInterrupt\n", exit: 130, stderr: "KeyboardInterrupt"},
	{name: "exit message", code: "raise SystemExit('bye ✓')\n", exit: 1, stderr: "bye ✓"},
	{name: "print", code: "print('hello ✓', 1.5, [None], {1: b'x'})\nimport sys\nprint('to stderr', file=sys.stderr)\n", stderr: "to stderr"},
	{name: "plot", code: "import sys\nhere = sys.path.pop(0)\nimport matplotlib.pyplot as plt\nplt.plot([1, 2], [3, 4])\nplt.title('t ✓')\n" +
		"sys.path.insert(0, here)\nraise RuntimeError('after the plot')\n", exit: 1, stderr: "after the plot"},
	{name: "tools", code: "from pybox_tools import call_mcp_tool, tools\nprint(call_mcp_tool('s.echo', x=[1, 'é']))\nprint(tools.s.echo(y=2))\ncall_mcp_tool('s.nope')\n",
		tools: echoTools{}, exit: 1, stderr: "MCPToolError"},
	{name: "eval pass", code: "def f():\n    return 2\n", test: ptr("assert f() == 2\n")},
	{name: "eval fail", code: "def f():\n    return 2\n", test: ptr("assert f() == 3, 'wrong ✓'\n"), exit: 1, stderr: "AssertionError"},
}

// TestRunnerImportsNothingPlanted: nothing the runner does for a program
// (tracebacks, exit messages, output, figures, code-mode tools, eval
// tests, session turns) runs a module an earlier run left in the code
// storage, for any standard-library name the runner could import lazily.
// (Python 3.11's traceback imports ast lazily from the program's path: a
// planted ast.py ran inside a program that only raised.) A program's own
// import of a planted name does run it, as on a host: the control.
func TestRunnerImportsNothingPlanted(t *testing.T) {
	t.Parallel() // its sandbox, folders and servers are its own; the package ends with these, two at a time
	sb, eng := newSandbox(t, sandbox.Config{MaxConcurrent: 2, WarmPool: -1})
	image := testenv.RuntimeImage(t, eng, "datascience")
	ws := workspace(t, "")
	names := plantStdlib(t, sb, image, ws)
	for _, c := range plantedCases {
		t.Run(c.name, func(t *testing.T) {
			file := strings.ReplaceAll(c.name, " ", "_") + "_prog.py"
			if err := os.WriteFile(filepath.Join(ws, file), []byte(c.code), 0o644); err != nil {
				t.Fatal(err)
			}
			res, err := sb.Run(t.Context(), sandbox.Program{Image: image, Workspace: ws, File: file, Test: c.test, Tools: c.tools})
			if err != nil {
				t.Fatal(err)
			}
			defer res.Outputs.Remove()
			checkPlanted(t, res, c.exit, c.stderr)
			if c.name == "plot" {
				if _, err := os.Stat(filepath.Join(res.Outputs.Dir, "figure-1.png")); err != nil {
					t.Errorf("the figure was not saved: %v (stderr %q)", err, res.Stderr)
				}
			}
		})
	}
	t.Run("session", func(t *testing.T) {
		for _, c := range plantedCases {
			if c.test != nil || c.name == "syntax error" {
				continue
			}
			res, err := sb.RunInSession(t.Context(), "planted", sandbox.SessionProgram{Image: image, Workspace: ws, Code: c.code,
				Filename: "/workspace/cell.py", Tools: echoTools{}}) // a session gets tools only if its first turn has them
			if err != nil {
				t.Fatal(err)
			}
			checkPlanted(t, res, c.exit, c.stderr)
		}
	})
	t.Run("control", func(t *testing.T) {
		code := "import " + names[len(names)/2] + "\n"
		res, err := sb.RunInSession(t.Context(), "planted", sandbox.SessionProgram{Code: code})
		if err != nil || !strings.Contains(res.Stderr, plantedMark) {
			t.Errorf("a program's own import of a planted name did not run it: %+v, %v", res, err)
		}
	})
}

func checkPlanted(t *testing.T, res sandbox.Result, exit int, stderr string) {
	t.Helper()
	if i := strings.Index(res.Stdout+res.Stderr, plantedMark); i >= 0 {
		t.Errorf("a planted module ran: %q", (res.Stdout + res.Stderr)[i:min(i+80, len(res.Stdout)+len(res.Stderr))])
	}
	if res.ExitCode != exit || !strings.Contains(res.Stderr, stderr) {
		t.Errorf("exit %d, stderr %q; want exit %d and %q in stderr", res.ExitCode, res.Stderr, exit, stderr)
	}
}

// plantOwn is a program's first lines when it plants, in its own private
// /workspace, a module for every standard-library name not imported yet:
// what a program of pybox eval (scratch workspace, PYBOX_PRIVATE) can do
// before it fails, since the runner imports its traceback modules lazily
// there.
const plantOwn = "import os, sys\n" +
	"for n in sorted(sys.stdlib_module_names - set(sys.modules)):\n" +
	"    with open(os.path.join('/workspace', n + '.py'), 'w') as f:\n" +
	"        f.write('import os\\nos.write(2, b\"\\\\n" + plantedMark + " ' + n + '\\\\n\")\\n')\n" +
	"del n, f\n"

// TestRunnerLazyImportsNothingPlanted: with a private workspace the
// runner imports its traceback modules only when a program fails, and
// then from the standard library: never a module the program itself
// planted in its folder (which comes first on its sys.path).
func TestRunnerLazyImportsNothingPlanted(t *testing.T) {
	t.Parallel() // its sandbox, folders and servers are its own; the package ends with these, two at a time
	sb, eng := newSandbox(t, sandbox.Config{MaxConcurrent: 2, WarmPool: -1})
	image := testenv.RuntimeImage(t, eng, "base")
	for _, c := range []plantedCase{
		{name: "raise", code: "def f():\n    return {'a': 1}['a'] / 0\nf()\n", exit: 1, stderr: "ZeroDivisionError"},
		{name: "exit message", code: "raise SystemExit('bye')\n", exit: 1, stderr: "bye"},
		{name: "eval fail", code: "def f():\n    return 2\n", test: ptr("assert f() == 3, 'wrong'\n"), exit: 1, stderr: "AssertionError"},
		{name: "eval pass", code: "def f():\n    return 2\n", test: ptr("assert f() == 2\n")},
	} {
		t.Run(c.name, func(t *testing.T) {
			code := plantOwn + c.code
			res, err := sb.Run(t.Context(), sandbox.Program{Image: image, File: "main.py", Source: &code, Test: c.test})
			if err != nil {
				t.Fatal(err)
			}
			checkPlanted(t, res, c.exit, c.stderr)
		})
	}
	t.Run("control", func(t *testing.T) { // the program's own import of a planted name runs it
		code := plantOwn + "import importlib, sys\nsys.path_importer_cache.clear()\nimportlib.invalidate_caches()\nimport traceback\n"
		res, err := sb.Run(t.Context(), sandbox.Program{Image: image, File: "main.py", Source: &code})
		if err != nil || !strings.Contains(res.Stderr, plantedMark+" traceback") {
			t.Errorf("the program's own import of a planted traceback did not run it: %+v, %v", res, err)
		}
	})
}
