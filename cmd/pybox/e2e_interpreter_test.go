//go:build !windows

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pybox-dev/pybox/internal/testenv"
)

// Stand-ins for interpreters that are not CPython (issue 7, class 6).
const (
	// echoArgs prints its arguments, as a wrapper that never runs Python would.
	echoArgs = "#!/bin/sh\necho \"$@\"\n"
	// cannedAnswer prints what a real CPython once answered to some probe.
	cannedAnswer = "#!/bin/sh\necho '{\"proof\": \"5df6e0e2761359d30a8275058e299fcc0381534545f55cf43e41983f5d4c9456\", " +
		"\"implementation\": \"cpython\", \"version\": [3, 11, 2], \"executable\": \"/usr/bin/python3\", \"prefix\": \"/usr\"}'\n"
	impostorDockerfile = `FROM ` + runtimeBase + `
USER root
COPY echo-args canned-answer /usr/local/bin/
RUN chown root:root /usr/local/bin/echo-args /usr/local/bin/canned-answer
USER 10001:10001
`
)

// TestConfigureRefusesNonCPython: an interpreter that is not CPython is a
// tool error naming it, and changes nothing: programs still run in the
// previous environment, and package checks and installs still answer from
// it. (Before the check, `python_path: "true"` was accepted, after which
// every program "succeeded" with no output and installs "succeeded".)
func TestConfigureRefusesNonCPython(t *testing.T) {
	eng := testenv.Docker(t)
	layerTest(t, func() {
		testenv.RuntimeImage(t, eng, "base")
		testenv.BuildImage(t, eng, impostorImage, impostorDockerfile, map[string]string{"echo-args": echoArgs, "canned-answer": cannedAnswer})
	})
	s := packageServer(t, testenv.Wheelhouse(t), testAllowedImages)
	tests := []struct {
		name, image, python, wantErr string
	}{
		{"true", runtimeBase, "true", `python_path "true" is not a CPython interpreter: it printed nothing`},
		{"a shell", runtimeBase, "/bin/sh", "Python does not start in " + runtimeBase + " with [/bin/sh]"},
		{"a path that does not exist", runtimeBase, "/nonexistent/python3", "Python does not start in " + runtimeBase + " with [/nonexistent/python3]"},
		{"a script that echoes its arguments", impostorImage, "/usr/local/bin/echo-args",
			`python_path "/usr/local/bin/echo-args" is not a CPython interpreter: it printed "-I -S -c import`},
		{"a canned CPython answer", impostorImage, "/usr/local/bin/canned-answer",
			`python_path "/usr/local/bin/canned-answer" is not a CPython interpreter: it printed "{\"proof\"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := s.envConfig()
			res := s.call("configure_environment", map[string]any{"type": "image", "image": tt.image, "python_path": tt.python})
			if !res.IsError {
				t.Errorf("configure_environment python_path %q was accepted: %s\n%s", tt.python, text(res), s.attackEffects())
				s.configure(map[string]any{"type": "venv-uv"}) // back to a real Python for the next case
				return
			}
			if !strings.Contains(text(res), tt.wantErr) {
				t.Errorf("configure_environment python_path %q: %q; want a tool error containing %q", tt.python, text(res), tt.wantErr)
			}
			if diff := cmp.Diff(before, s.envConfig()); diff != "" {
				t.Errorf("the refused interpreter changed the environment (-before +after):\n%s", diff)
			}
			if out := s.python("print(1)"); out != "1\n" {
				t.Errorf("after the refusal print(1) printed %q; want 1", out)
			}
		})
	}
	if st := s.check("pip"); !st.Installed || st.Version == "" {
		t.Errorf("check_installed_packages pip after the refusals: %+v; want the real venv's pip", st)
	}
	if inst := s.install("pyboxdemo"); inst.Cached || inst.Installer == "" {
		t.Errorf("install_dependencies after the refusals: cached=%v installer=%q; want a real install", inst.Cached, inst.Installer)
	}
	if out := s.python("import pyboxdemo; print(pyboxdemo.answer())"); out != "42\n" {
		t.Errorf("the installed package: %q; want 42", out)
	}
}

// attackEffects describes what a program and an install did in the
// active environment: with a non-Python interpreter both "succeed".
func (s *server) attackEffects() string {
	s.t.Helper()
	run := s.call("execute_code", map[string]any{"code": "print(1)"})
	inst := s.call("install_dependencies", map[string]any{"packages": []string{"pyboxdemo"}})
	return fmt.Sprintf("then execute_code print(1): isError=%v %s; install_dependencies pyboxdemo: isError=%v %q",
		run.IsError, structured(run), inst.IsError, text(inst))
}

// structured is a result's structured content as JSON.
func structured(res *mcp.CallToolResult) string {
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// savedEnvironment is the active environment in the state file, as JSON.
type savedEnvironment struct {
	Type       string `json:"type"`
	PythonPath string `json:"python_path"`
	Executable string `json:"executable"`
}

// savedState reads the state file's active environment.
func savedState(t *testing.T, stateDir string) savedEnvironment {
	t.Helper()
	var st struct {
		Environment savedEnvironment `json:"environment"`
	}
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(stateDir, "environment.json"))), &st); err != nil {
		t.Fatal(err)
	}
	return st.Environment
}

// TestConfigureRecordsInterpreter: an accepted environment records the
// absolute interpreter the probe ran (sys.executable) in the state file;
// for conda that is the env's python, not conda.
func TestConfigureRecordsInterpreter(t *testing.T) {
	parallelTest(t) // it installs nothing, and its image is its own (condaProbeImage): no layer-cache lock
	eng := testenv.Docker(t)
	testenv.RuntimeImage(t, eng, "base")
	testenv.BuildImage(t, eng, condaProbeImage, condaDockerfile, map[string]string{"conda": condaScript})
	stateDir := t.TempDir()
	s := startServer(t, "PYBOX_STATE_DIR="+stateDir, testAllowedImages)
	tests := []struct {
		name string
		args map[string]any
		want string
	}{
		{"image with system python", map[string]any{"type": "image", "image": runtimeBase, "python_path": "/usr/bin/python3"}, "/usr/bin/python3"},
		{"image with python3 on PATH", map[string]any{"type": "image", "image": runtimeBase}, "/opt/venv/bin/python3"},
		{"venv-uv default", map[string]any{"type": "venv-uv"}, "/opt/venv/bin/python"},
		{"conda", map[string]any{"type": "conda", "conda_name": "ds", "image": condaProbeImage}, "/opt/conda-envs/ds/bin/python"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s.configure(tt.args)
			if got := savedState(t, stateDir).Executable; got != tt.want {
				t.Errorf("saved executable = %q; want %q", got, tt.want)
			}
		})
	}
}

// TestRestoredEnvironmentIsVerified: a saved environment that was never
// verified (a state file from before the check) is probed when a server
// adopts it: a real Python is kept and its interpreter recorded; a
// non-Python one is refused and the server starts from its configuration.
func TestRestoredEnvironmentIsVerified(t *testing.T) {
	parallelTest(t)
	stateDir := t.TempDir()
	s1 := startServer(t, "PYBOX_STATE_DIR="+stateDir)
	s1.configure(map[string]any{"type": "image", "image": runtimeBase, "python_path": "/usr/bin/python3"})
	s1.close()

	editSavedEnvironment(t, stateDir, func(env map[string]any) { delete(env, "executable") })
	s2 := startServer(t, "PYBOX_STATE_DIR="+stateDir)
	if got := s2.envConfig(); got.Type != "image" || got.PythonPath != "/usr/bin/python3" {
		t.Errorf("restored environment: %s %q; want the saved image with /usr/bin/python3", got.Type, got.PythonPath)
	}
	if got := savedState(t, stateDir).Executable; got != "/usr/bin/python3" {
		t.Errorf("executable saved after restoring an unverified environment = %q; want /usr/bin/python3", got)
	}
	s2.close()

	editSavedEnvironment(t, stateDir, func(env map[string]any) {
		env["python_path"] = "true"
		delete(env, "executable")
	})
	s3 := startServer(t, "PYBOX_STATE_DIR="+stateDir)
	if got := s3.envConfig(); got.Type != "venv-uv" {
		t.Errorf("a saved python_path \"true\" was adopted: %s %q; want the configured venv-uv", got.Type, got.PythonPath)
	}
	if out := s3.python("print(1)"); out != "1\n" {
		t.Errorf("print(1) after restoring a saved python_path \"true\": %q; want 1", out)
	}
	if log, ok := s3.stderr.Await(`python_path \"true\" is not a CPython interpreter`); !ok {
		t.Errorf("the server log does not say why the saved environment was dropped:\n%s", log)
	}
}

// editSavedEnvironment rewrites the active environment in the state file.
func editSavedEnvironment(t *testing.T, stateDir string, edit func(map[string]any)) {
	t.Helper()
	path := filepath.Join(stateDir, "environment.json")
	var st map[string]any
	if err := json.Unmarshal([]byte(readFile(t, path)), &st); err != nil {
		t.Fatal(err)
	}
	env, ok := st["environment"].(map[string]any)
	if !ok {
		t.Fatalf("no environment in the state file: %v", st)
	}
	edit(env)
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestInitialEnvironmentMustBeCPython: a configured start environment
// (ENV_TYPE=image with PYBOX_PYTHON_PATH) that is not CPython never runs a
// program; the server log says why.
func TestInitialEnvironmentMustBeCPython(t *testing.T) {
	parallelTest(t)
	s := startServer(t, "ENV_TYPE=image", "PYBOX_IMAGE="+runtimeBase, "PYBOX_PYTHON_PATH=true")
	if res := s.call("execute_code", map[string]any{"code": "print(1)"}); !res.IsError {
		t.Errorf("execute_code print(1) with PYBOX_PYTHON_PATH=true succeeded: %s; want a tool error", structured(res))
	}
	if log, ok := s.stderr.Await(`python_path \"true\" is not a CPython interpreter`); !ok {
		t.Errorf("the server log does not say why the environment is not ready:\n%s", log)
	}
}
