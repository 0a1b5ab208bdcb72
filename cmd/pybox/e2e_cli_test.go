//go:build !windows

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/container"

	"github.com/pybox-dev/pybox/images"
	"github.com/pybox-dev/pybox/internal/engine"
	"github.com/pybox-dev/pybox/internal/testenv"
)

// runBinary runs the pybox binary and returns stdout, stderr and the exit status.
func runBinary(t *testing.T, stdin string, args ...string) (string, string, int) {
	t.Helper()
	return runBinaryWith(t, stdin, nil, args...)
}

// runBinaryEnv is runBinary with more environment and no input.
func runBinaryEnv(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	return runBinaryWith(t, "", env, args...)
}

func runBinaryWith(t *testing.T, stdin string, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(pyboxBin, args...)
	cmd.Env = append(append(os.Environ(), "PYBOX_BUILD=never", "CODE_STORAGE_DIR="+t.TempDir()), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("run pybox %v: %v", args, err)
	}
	return out.String(), errb.String(), cmd.ProcessState.ExitCode()
}

func writeProgram(t *testing.T, code string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "prog.py")
	if err := os.WriteFile(path, []byte(code), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestRunExitCodes: `pybox run` passes the program's streams and exit status through.
func TestRunExitCodes(t *testing.T) {
	parallelTest(t)
	testenv.RuntimeImage(t, testenv.Docker(t), "base")
	answers := filepath.Join(t.TempDir(), "answers.txt")
	os.WriteFile(answers, []byte("42\n"), 0o644)
	tests := []struct {
		name       string
		args       []string
		stdin      string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{"success", []string{"run", writeProgram(t, "print('ok')")}, "", 0, "ok\n", ""},
		{"exit 7", []string{"run", writeProgram(t, "import sys\nprint('x'); sys.exit(7)")}, "", 7, "x\n", ""},
		{"exception", []string{"run", writeProgram(t, "raise KeyError('k')")}, "", 1, "", "KeyError: 'k'"},
		{"timeout", []string{"run", "--timeout", "1s", writeProgram(t, "while True: pass")}, "", 124, "", "timed out after 1s"},
		{"oom", []string{"run", "--memory", "64m", writeProgram(t, "x = []\nwhile True: x.append(bytearray(8 << 20))")}, "", 137, "", "out of memory"},
		{"program on stdin", []string{"run", "-"}, "print(6 * 7)", 0, "42\n", ""},
		{"stdin file", []string{"run", "--stdin", answers, writeProgram(t, "print(int(input()) + 1)")}, "", 0, "43\n", ""},
		{"missing file", []string{"run", "/nonexistent/prog.py"}, "", 125, "", "read program"},
		{"no arguments", []string{"run"}, "", 2, "", "Usage"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stdout, stderr, code := runBinary(t, tt.stdin, tt.args...)
			if code != tt.wantCode || stdout != tt.wantStdout || !strings.Contains(stderr, tt.wantStderr) {
				t.Errorf("got code %d stdout %q stderr %q; want code %d stdout %q stderr containing %q",
					code, stdout, stderr, tt.wantCode, tt.wantStdout, tt.wantStderr)
			}
		})
	}
}

// TestRunJSON: --json prints a machine-readable verdict.
func TestRunJSON(t *testing.T) {
	parallelTest(t)
	testenv.RuntimeImage(t, testenv.Docker(t), "base")
	stdout, _, code := runBinary(t, "import sys\nprint('out')\nprint('err', file=sys.stderr)\nsys.exit(4)", "run", "--json", "-")
	var v verdict
	if err := json.Unmarshal([]byte(stdout), &v); err != nil {
		t.Fatalf("verdict %q: %v", stdout, err)
	}
	if code != 4 || v.ExitCode != 4 || v.Stdout != "out\n" || v.Stderr != "err\n" || v.TimedOut {
		t.Errorf("code %d verdict %+v", code, v)
	}
}

// TestDoctorHealthy: on this host every check passes.
// Its self-tests' folders are gone when it exits (a warm pool refilling
// for them while they were removed left an empty outputs/ per run).
func TestDoctorHealthy(t *testing.T) {
	parallelTest(t)
	testenv.RuntimeImage(t, testenv.Docker(t), "base")
	tmp := t.TempDir() // the system's temporary folder, as doctor sees it
	stdout, stderr, code := runBinaryEnv(t, []string{"TMPDIR=" + tmp}, "doctor")
	if code != 0 || strings.Contains(stdout, "FAIL") {
		t.Fatalf("doctor exit %d\n%s%s", code, stdout, stderr)
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("doctor left %s in its temporary folder", left[0].Name())
	}
	for _, want := range []string{"docker", "API", "runtime image", "runtimes", "non-root", "no network", "read-only root", "clean env", "gvisor"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("doctor output lacks %q:\n%s", want, stdout)
		}
	}
	// With gVisor registered, doctor proves it works: the self-test under runsc.
	if rts := testenv.Runtimes(t, testenv.Docker(t)); len(rts) > 1 {
		for _, want := range []string{"OK   no network (runsc)", "OK   non-root (runsc)", "OK   self-test (runsc)"} {
			if !strings.Contains(stdout, want) {
				t.Errorf("doctor output lacks %q:\n%s", want, stdout)
			}
		}
	}
}

func createLabelled(t *testing.T, eng *engine.Client, name string, labels map[string]string) string {
	t.Helper()
	id, err := eng.Create(context.Background(), engine.Spec{Name: name,
		Config: &container.Config{Image: images.Tag("base"), Cmd: []string{"true"}, Labels: labels, NetworkDisabled: true},
		Host:   &container.HostConfig{NetworkMode: "none"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Remove(context.Background(), id) })
	return id
}

// `pybox --help` lists the commands (it printed serve's flags), `pybox
// --version` prints the version, and `pybox serve --help` still gives
// serve's flags.
func TestHelpAndVersion(t *testing.T) {
	parallelTest(t)
	for _, arg := range []string{"--help", "-h"} {
		stdout, _, code := runBinary(t, "", arg)
		if code != 0 || !strings.Contains(stdout, "pybox doctor") || !strings.Contains(stdout, "pybox run") {
			t.Errorf("pybox %s: exit %d\n%s", arg, code, stdout)
		}
	}
	if stdout, _, code := runBinary(t, "", "--version"); code != 0 || !strings.HasPrefix(stdout, "pybox ") {
		t.Errorf("pybox --version: exit %d %q", code, stdout)
	}
	if _, stderr, code := runBinary(t, "", "serve", "--help"); code != 0 || !strings.Contains(stderr, "Usage: pybox serve") || !strings.Contains(stderr, "-workspace-quota") {
		t.Errorf("pybox serve --help: exit %d\n%s", code, stderr)
	}
}
