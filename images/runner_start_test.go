package images

import (
	"bytes"
	"compress/zlib"
	"os/exec"
	"slices"
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

// TestRunnerBootstrap: RunnerArgs' bootstrap runs the runner it reads
// from stdin, from source (RunnerFrame) or compiled by the interpreter
// that runs it (zlib of marshal, as a runner asked with RunnerFrame(true)
// sends it back, through CompiledFrame: the smaller frame), and nothing
// else: here the runner refuses at once (it is not PID 1 of a container,
// which only the runner's own code says). With stdin closed before a whole
// frame came, it ends quietly, as the runner does when pybox is gone.
func TestRunnerBootstrap(t *testing.T) {
	py := hostPython(t)
	compile := exec.Command(py, "-I", "-S", "-c", "import marshal, sys, zlib\n"+
		"sys.stdout.buffer.write(zlib.compress(marshal.dumps(compile(sys.stdin.buffer.read(), '<pybox-runner>', 'exec')), 9))")
	compile.Stdin = bytes.NewReader(runnerText)
	z, err := compile.Output()
	if err != nil {
		t.Fatal(err)
	}
	compiled, err := CompiledFrame(z)
	if err != nil {
		t.Fatal(err)
	}
	if len(compiled) >= len(RunnerFrame(false)) {
		t.Errorf("the compiled runner's frame is %d bytes, the source's %d", len(compiled), len(RunnerFrame(false)))
	}
	if n := len(strings.Join(RunnerArgs(), " ")); n > 1024 {
		t.Errorf("the runner's command is %d bytes; want the bootstrap alone", n)
	}
	boot := func(stdin []byte) (int, string, string) {
		cmd := exec.Command(py, append(RunnerArgs(), "once")...)
		var stdout, stderr bytes.Buffer
		cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(stdin), &stdout, &stderr
		cmd.Run()
		return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
	}
	for name, frame := range map[string][]byte{"source": RunnerFrame(false), "source, sending it back compiled": RunnerFrame(true), "compiled": compiled} {
		code, _, stderr := boot(append(slices.Clip(frame), '\n'))
		if code != 70 || !strings.Contains(stderr, "pybox runner: not PID 1") {
			t.Errorf("the runner from its %s outside a container: exit %d, stderr %q; want 70 and its refusal", name, code, stderr)
		}
	}
	for name, stdin := range map[string][]byte{"nothing": nil, "half a header": []byte("S12"), "half a runner": RunnerFrame(false)[:1000]} {
		if code, stdout, stderr := boot(stdin); code != 0 || stdout != "" || stderr != "" {
			t.Errorf("the bootstrap given %s before stdin closed: exit %d, stdout %q, stderr %q; want 0 and silence", name, code, stdout, stderr)
		}
	}
}

// TestCompiledFrameRefuses: only zlib of a bounded size, compressed and
// not, becomes a frame.
func TestCompiledFrameRefuses(t *testing.T) {
	var bomb bytes.Buffer
	w := zlib.NewWriter(&bomb)
	w.Write(make([]byte, maxCompiled+1))
	w.Close()
	for name, z := range map[string][]byte{
		"nothing":                nil,
		"not zlib":               []byte("not zlib"),
		"too big":                bytes.Repeat([]byte{1}, maxCompiled+1),
		"too big uncompressed":   bomb.Bytes(),
		"zlib cut in the middle": bomb.Bytes()[:bomb.Len()/2],
	} {
		if frame, err := CompiledFrame(z); err == nil {
			t.Errorf("CompiledFrame(%s) = %.80q; want an error", name, frame)
		}
	}
}

// TestRunnerSendsItsCode: asked by its frame, the runner's supervisor
// sends the code the bootstrap compiled (zlib of marshal: the same code
// object once loaded) with its ready frame, and nothing when not asked.
// Run with this host's python3 on the supervisor's own definitions.
func TestRunnerSendsItsCode(t *testing.T) {
	py := hostPython(t)
	src := strings.TrimSuffix(strings.TrimSpace(string(supervisorPy)), "sys.exit(main(sys.argv[1:]))")
	probe := src + `
import marshal, zlib
code = compile("x = 1\nprint(x)\n", "<pybox-runner>", "exec")
sent = compiled_self((code, True))
print(marshal.loads(zlib.decompress(sent)) == code, compiled_self((code, False)) == b"", compiled_self(None) == b"")
`
	if got := runPython(t, py, "-I", "-S", "-c", probe); got != "True True True\n" {
		t.Errorf("the runner's code sent back: %q; want it when asked, nothing else", got)
	}
}
