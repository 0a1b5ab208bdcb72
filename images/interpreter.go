package images

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Interpreter is what the CPython check learnt about an environment's
// Python.
type Interpreter struct {
	Implementation string `json:"implementation"`
	Version        []int  `json:"version"`
	Executable     string `json:"executable"`
	Proof          string `json:"proof"`
}

// minVersion is the oldest CPython pybox runs.
var minVersion = [2]int{3, 8}

// interpreterProbe returns a program that only a real Python can answer:
// it prints one JSON line whose proof is the SHA-256 of a fresh nonce (the
// answer appears nowhere in the program, so echoing it or a canned reply
// fails), with sys.implementation, the version and sys.executable.
func interpreterProbe() (code, nonce string) {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on Linux (documented)
	nonce = hex.EncodeToString(b)
	code = "import hashlib, json, sys; print(json.dumps({'proof': hashlib.sha256(b'" + nonce + "').hexdigest(), " +
		"'implementation': sys.implementation.name, 'version': list(sys.version_info[:3]), 'executable': sys.executable}))"
	return code, nonce
}

// parseInterpreter checks the probe's output against nonce.
func parseInterpreter(out, nonce string) (Interpreter, error) {
	line := strings.TrimSpace(out)
	if i := strings.LastIndexByte(line, '\n'); i >= 0 {
		line = line[i+1:]
	}
	sum := sha256.Sum256([]byte(nonce))
	var in Interpreter
	if err := json.Unmarshal([]byte(line), &in); err != nil || in.Proof != hex.EncodeToString(sum[:]) {
		if strings.TrimSpace(out) == "" {
			return in, errors.New("it printed nothing")
		}
		return in, fmt.Errorf("it printed %.80q", strings.TrimSpace(out))
	}
	if len(in.Version) < 2 || in.Implementation != "cpython" ||
		in.Version[0] < minVersion[0] || in.Version[0] == minVersion[0] && in.Version[1] < minVersion[1] {
		return in, fmt.Errorf("it is %s %v; pybox needs CPython %d.%d or later", in.Implementation, in.Version, minVersion[0], minVersion[1])
	}
	if !strings.HasPrefix(in.Executable, "/") {
		return in, fmt.Errorf("it does not know its own executable (sys.executable is %q)", in.Executable)
	}
	return in, nil
}

// verify runs the CPython check in env's image, as the runner starts the
// interpreter (-I -S), and records the interpreter's absolute path in
// env.Executable. Errors wrap errBadEnv and name the interpreter.
func (m *Manager) verify(ctx context.Context, env *Environment) error {
	code, nonce := interpreterProbe()
	out, err := m.cfg.Prober.Probe(ctx, env.Ref(), append(env.Python(), "-I", "-S"), code)
	if err != nil {
		// %w keeps a probe that could not run (busy, Docker gone) telling so.
		return fmt.Errorf("%w: Python does not start in %s with %v: %w", errBadEnv, env.Image, env.Python(), err)
	}
	in, err := parseInterpreter(out, nonce)
	if err != nil {
		return fmt.Errorf("%w: %s is not a CPython interpreter: %w", errBadEnv, env.interpreterName(), err)
	}
	env.Executable = in.Executable
	return nil
}

// interpreterName names the interpreter the way the environment chose it.
func (e Environment) interpreterName() string {
	switch e.Type {
	case EnvImage:
		return fmt.Sprintf("python_path %q", e.PythonPath)
	case EnvConda:
		return fmt.Sprintf("the python of conda env %q", e.CondaName)
	}
	return fmt.Sprintf("the python of the venv %q", e.VenvPath)
}

// ownRuntime reports whether env runs the venv of a runtime image pybox
// built itself (whose build asserts that venv's interpreter).
func (e Environment) ownRuntime() bool {
	return e.Variant != "" && (e.Type == EnvVenvUV || e.Type == EnvVenv) && e.VenvPath == DefaultVenvPath
}
