package images

import (
	"bytes"
	"compress/zlib"
	_ "embed"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strings"
)

// The in-image runner: the worker half's definitions, then the supervisor,
// which runs main (see the files' doc strings).
var (
	//go:embed runner/worker.py
	workerPy []byte
	//go:embed runner/runner.py
	supervisorPy []byte
	//go:embed runner/forward.py
	forwardPy []byte
)

// RunnerArgs is the argv tail that starts the in-image runner with any
// Python: isolated and without site (-I -S: nothing is imported from the
// working directory, PYTHON* variables or site-packages before a program's
// request arrives), then a one-line bootstrap carrying the runner itself,
// so it works in images pybox did not build (user images, conda) without
// mounting anything. The runner's own argument (once or kernel) follows.
func RunnerArgs() []string {
	return []string{"-I", "-S", "-c", runnerBootstrap}
}

// runnerSource is the runner as base64 of its Python source.
var runnerSource = base64.StdEncoding.EncodeToString(append(append(append(append(append([]byte{}, workerPy...), '\n'), forwardPy...), '\n'), supervisorPy...))

// The bootstrap decodes with binascii (built in), not base64, which would
// import re; and it compiles the runner at every start (~10 ms of CPU).
var runnerBootstrap = "import binascii;exec(compile(binascii.a2b_base64('" + runnerSource + "').decode(),'<pybox-runner>','exec'))"

// compiledMark starts the line CompileRunnerProbe prints.
const compiledMark = "pybox-runner "

// maxCompiledArg bounds the compiled runner's bootstrap: one argument of
// a process may hold 128 KiB on Linux (MAX_ARG_STRLEN).
const maxCompiledArg = 120 << 10

// CompileRunnerProbe is a program for Sandbox.Probe, run with the
// interpreter flags of RunnerArgs, that compiles the runner with the
// image's own Python and prints it (marshal, zlib, base64, on a line of
// its own) for CompiledRunnerArgs.
func CompileRunnerProbe() string {
	return "import binascii,marshal,sys,zlib;c=compile(binascii.a2b_base64('" + runnerSource + "').decode(),'<pybox-runner>','exec');" +
		"sys.stdout.write('" + compiledMark + "'+binascii.b2a_base64(zlib.compress(marshal.dumps(c),9),newline=False).decode()+'\\n')"
}

// CompiledRunnerArgs is RunnerArgs with the runner as out, the output of
// CompileRunnerProbe, has it: compiled by the interpreter of the image the
// probe ran in, so a container of that image and interpreter starts the
// runner without compiling it (only there: marshal's format is the
// interpreter version's). The compiled code is as trusted as the image's
// interpreter, which runs the runner anyway: the probe ran it isolated and
// without site (-I -S), so nothing but the interpreter and its standard
// library (which no install can write: see Dockerfile.runtime) took part.
func CompiledRunnerArgs(out string) ([]string, error) {
	var payload string
	for line := range strings.Lines(out) {
		if p, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), compiledMark); ok {
			payload = p
		}
	}
	if payload == "" {
		return nil, errors.New("the probe printed no compiled runner")
	}
	if strings.Trim(payload, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=") != "" {
		return nil, errors.New("the compiled runner is not base64") // nothing else may go between the bootstrap's quotes
	}
	boot := "import binascii,marshal,zlib;exec(marshal.loads(zlib.decompress(binascii.a2b_base64('" + payload + "'))))"
	if len(boot) > maxCompiledArg {
		return nil, fmt.Errorf("the compiled runner is %d bytes, more than an argument holds", len(boot))
	}
	z, err := base64.StdEncoding.DecodeString(payload)
	if err == nil {
		var r io.ReadCloser
		if r, err = zlib.NewReader(bytes.NewReader(z)); err == nil {
			_, err = io.Copy(io.Discard, io.LimitReader(r, 4<<20))
			r.Close()
		}
	}
	if err != nil {
		return nil, fmt.Errorf("the compiled runner is not valid: %w", err)
	}
	return []string{"-I", "-S", "-c", boot}, nil
}
