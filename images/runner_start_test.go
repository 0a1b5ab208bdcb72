package images

import (
	"bytes"
	"encoding/base64"
	"os/exec"
	"strings"
	"testing"
)

// hostPython is this host's python3, for the tests that run the runner's
// own definitions outside a container.
func hostPython(t *testing.T) string {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 on this host")
	}
	return py
}

// runPython runs code with py's args and returns its stdout; a failure
// is fatal.
func runPython(t *testing.T, py string, args ...string) string {
	t.Helper()
	cmd := exec.Command(py, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python3: %v\n%s", err, stderr.String())
	}
	return string(out)
}

// TestRunnerStartImports: the runner's definitions import none of the
// modules that cost its start the most (json imports re and compiles its
// patterns, signal imports enum, base64 imports re, threading its own
// chain), and its JSON codec, made of json's C parts, reads and writes
// what json does. Run with this host's python3, isolated as in a container.
func TestRunnerStartImports(t *testing.T) {
	py := hostPython(t)
	src := strings.TrimSuffix(strings.TrimSpace(string(supervisorPy)), "sys.exit(main(sys.argv[1:]))")
	probe := string(workerPy) + "\n" + string(forwardPy) + "\n" + src + `
heavy = sorted(set(sys.modules) & {"re", "json", "enum", "base64", "signal", "threading", "functools", "collections"})
import json
values = [{"nonce": "ab", "code": "print('\u00e9\\n\\t\"x\"')\n", "stdin": None, "args": ["1", "\u2028"], "cap": 65537,
           "test": None, "linger": False, "v": [1.5, -2, 1e300, 12345678901234567890, {"a": {}}, []]}, "text", 3, None]
same = all(json_loads(json.dumps(v).encode()) == v and json_dumps(v) == json.dumps(v) for v in values)
go = json_loads(b'{"a":"\\u003chi\\u003e \\u0026 \\ufffd","b":[true,false,null,0.1]}')
bad = []
for text in (b"{", b'{"a": 1} x', b"nope", b""):
    try:
        json_loads(text)
    except ValueError:
        continue
    bad.append(text)
print(heavy, same, go, bad, json_loads is json.loads)
`
	got := runPython(t, py, "-I", "-S", "-c", probe)
	want := "[] True {'a': '<hi> & \ufffd', 'b': [True, False, None, 0.1]} [] False\n"
	if got != want {
		t.Errorf("the runner's start:\n%s\nwant:\n%s(heavy modules imported, codec as json, Go's escapes read, bad JSON refused, not json's own)", got, want)
	}
}

// TestCompiledRunner: CompileRunnerProbe's output, compiled by the
// interpreter that runs it, starts the runner itself through
// CompiledRunnerArgs (here it refuses at once: it is not PID 1 of a
// container, which only the runner's own code says).
func TestCompiledRunner(t *testing.T) {
	py := hostPython(t)
	out := runPython(t, py, "-I", "-S", "-c", CompileRunnerProbe())
	args, err := CompiledRunnerArgs(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(args[3]) >= len(runnerBootstrap) {
		t.Errorf("the compiled runner's bootstrap is %d bytes, the source's %d", len(args[3]), len(runnerBootstrap))
	}
	cmd := exec.Command(py, append(args, "once")...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	if code := cmd.ProcessState.ExitCode(); code != 70 || !strings.Contains(stderr.String(), "pybox runner: not PID 1") {
		t.Errorf("the compiled runner outside a container: exit %d (%v), stderr %q; want 70 and its refusal", code, err, stderr.String())
	}
}

// TestCompiledRunnerArgsRefuses: only a probe's compiled runner becomes a
// bootstrap: nothing but base64 of zlib goes between its quotes.
func TestCompiledRunnerArgsRefuses(t *testing.T) {
	big := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{1}, 100<<10))
	for _, out := range []string{
		"",
		"Python 3.11\n",
		compiledMark + "eJw='),print('owned\n",
		compiledMark + "bm90IHpsaWI=\n", // base64, not zlib
		compiledMark + big + "\n",
	} {
		if args, err := CompiledRunnerArgs(out); err == nil {
			t.Errorf("CompiledRunnerArgs(%.60q) = %.80q; want an error", out, args)
		}
	}
}
