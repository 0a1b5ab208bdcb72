//go:build !windows

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pybox-dev/pybox/internal/testenv"
	"github.com/pybox-dev/pybox/tools"
)

// Calls written for mcp_code_executor work unchanged: execute_code_file
// takes the container path its tracebacks show (/workspace/x.py), and
// configure_environment takes uv_venv_path.
func TestMCPCodeExecutorCallsWorkUnchanged(t *testing.T) {
	parallelTest(t)
	s := startServer(t, "PYBOX_TOOLSET=mcp-code-executor")
	made := decode[tools.FileOutput](t, s.call("initialize_code_file", map[string]any{"content": "print('from the file')", "filename": "job"}))
	name := filepath.Base(made.FilePath)
	res := s.call("execute_code_file", map[string]any{"file_path": "/workspace/" + name})
	if res.IsError || !strings.Contains(text(res), "from the file") {
		t.Errorf("execute_code_file with the container path /workspace/%s: %s", name, text(res))
	}
	if res := s.call("execute_code_file", map[string]any{"file_path": "/workspace/../etc/passwd"}); !res.IsError || !strings.Contains(text(res), "outside") {
		t.Errorf("a container path that leaves the workspace: %s", text(res))
	}
	res = s.call("configure_environment", map[string]any{"type": "venv-uv", "uv_venv_path": "/opt/venv"})
	if res.IsError || !strings.Contains(text(res), "venv-uv") {
		t.Errorf("configure_environment with uv_venv_path: %s", text(res))
	}
	if res := s.call("configure_environment", map[string]any{"type": "venv", "uv_venv_path": "/opt/venv"}); !res.IsError || !strings.Contains(text(res), "use venv_path") {
		t.Errorf("uv_venv_path with type venv: %s", text(res))
	}
}

// Calls and prompts written for mcp-python-executor work unchanged:
// execute_python with scriptPath, inputData as stdin lines and as argv,
// install_packages with a comma-separated string, health_check, and its
// three prompts.
func TestPythonExecutorCallsWorkUnchanged(t *testing.T) {
	layerTest(t)
	wh := testenv.Wheelhouse(t)
	s := packageServer(t, wh, "PYBOX_TOOLSET=python-executor")
	script := "import sys\nprint('argv', sys.argv[1:])\nprint('stdin', input(), input())"
	if res := s.call("execute_python", map[string]any{"code": "open('job.py', 'w').write(" + fmt.Sprintf("%q", script) + ")"}); res.IsError {
		t.Fatalf("write the script: %s", text(res))
	}
	for _, path := range []string{"job.py", "/workspace/job.py", filepath.Join(s.storage, "job.py")} {
		res := s.call("execute_python", map[string]any{"scriptPath": path, "inputData": []string{"a", "b"}})
		if res.IsError || !strings.Contains(text(res), "argv ['a', 'b']") || !strings.Contains(text(res), "stdin a b") {
			t.Errorf("execute_python scriptPath=%s with inputData: %s", path, text(res))
		}
	}
	res := s.call("execute_python", map[string]any{"code": "import sys\nprint(sys.argv[1:], input())", "inputData": []string{"x"}})
	if res.IsError || !strings.Contains(text(res), "['x'] x") {
		t.Errorf("execute_python code with inputData: %s", text(res))
	}
	if res := s.call("execute_python", map[string]any{"scriptPath": "/etc/passwd"}); !res.IsError || !strings.Contains(text(res), "outside") {
		t.Errorf("scriptPath outside the workspace: %s", text(res))
	}
	res = s.call("install_packages", map[string]any{"packages": "pyboxdemo, pyboxother"})
	if res.IsError || !strings.Contains(text(res), "pyboxdemo") || !strings.Contains(text(res), "pyboxother") {
		t.Errorf("install_packages with a comma-separated string: %s", text(res))
	}
	if res := s.call("execute_python", map[string]any{"code": "import pyboxdemo, pyboxother\nprint(pyboxdemo.answer())"}); !strings.Contains(text(res), "42") {
		t.Errorf("import after install_packages: %s", text(res))
	}
	health := decode[tools.HealthOutput](t, s.call("health_check", map[string]any{}))
	if health.Status != "ok" || health.Environment.Image == "" {
		t.Errorf("health_check: %+v", health)
	}
	prompts, err := s.cs.ListPrompts(t.Context(), nil)
	if err != nil || len(prompts.Prompts) != 3 {
		t.Fatalf("prompts: %v %+v", err, prompts)
	}
	got, err := s.cs.GetPrompt(t.Context(), &mcp.GetPromptParams{Name: "debug-python", Arguments: map[string]string{"code": "1/0", "error": "ZeroDivisionError"}})
	if err != nil || len(got.Messages) != 1 || !strings.Contains(got.Messages[0].Content.(*mcp.TextContent).Text, "ZeroDivisionError") {
		t.Errorf("debug-python prompt: %v %+v", err, got)
	}
	if _, err := s.cs.GetPrompt(t.Context(), &mcp.GetPromptParams{Name: "execute-python"}); err == nil || !strings.Contains(err.Error(), "task") {
		t.Errorf("execute-python without its required task: %v", err)
	}
}

// check_installed_packages answers for import names as well as
// distribution names, and says which matched (mcp_code_executor answers
// for import names: json, PIL, sklearn).
func TestCheckInstalledPackagesTakesImportNames(t *testing.T) {
	layerTest(t)
	wh := testenv.Wheelhouse(t)
	testenv.WriteWheel(t, wh, testenv.Wheel{Name: "pybox-imaging", Version: "3.1", Code: "X = 1\n", Files: map[string]string{"pyboximg/__init__.py": "Y = 2\n"}})
	s := packageServer(t, wh)
	s.install("pybox-imaging")
	want := map[string]string{"pybox-imaging": "distribution", "pyboximg": "import name of pybox-imaging", "json": "standard library"}
	for name, matched := range want {
		st := s.check(name)
		if !st.Installed || st.Matched != matched || st.Version == "" {
			t.Errorf("check %s: %+v; want installed, matched %q", name, st, matched)
		}
	}
	if st := s.check("nosuchthing"); st.Installed {
		t.Errorf("check nosuchthing: %+v", st)
	}
}

// PREINSTALLED_PACKAGES that cannot be installed are reported once,
// clearly, and never block running code (every call failed with an
// "internal failure" after ~8 s).
func TestFailedPreinstallDoesNotBlock(t *testing.T) {
	layerTest(t)
	wh := testenv.Wheelhouse(t)
	s := packageServer(t, wh, "PREINSTALLED_PACKAGES=pyboxdemo nosuchpackage-xyz")
	start := time.Now()
	out, res := s.exec(map[string]any{"code": "print('runs')"})
	if out.Stdout != "runs\n" || !strings.Contains(text(res), "PREINSTALLED_PACKAGES") || !strings.Contains(text(res), "nosuchpackage-xyz") {
		t.Fatalf("the first call after a failed preinstall: %s", text(res))
	}
	out, res = s.exec(map[string]any{"code": "print('again')"})
	if out.Stdout != "again\n" || strings.Contains(text(res), "PREINSTALLED_PACKAGES") {
		t.Errorf("the second call: %s; want it to run, without the note again", text(res))
	}
	t.Logf("two calls after a failed preinstall took %v", time.Since(start))
}

// mcp-executor's tools share one workspace, as in the original: a file
// write_file made is what execute_python reads, what the program writes
// read_file finds, and variables persist between calls.
func TestMCPExecutorOneWorkspace(t *testing.T) {
	parallelTest(t)
	s := startServer(t, "PYBOX_TOOLSET=mcp-executor")
	if res := s.call("write_file", map[string]any{"path": "data.csv", "content": "a,b\n1,2\n"}); res.IsError {
		t.Fatalf("write_file: %s", text(res))
	}
	res := s.call("execute_python", map[string]any{"code": "rows = open('data.csv').read().split()\nprint(len(rows))\nopen('result.txt', 'w').write(rows[1])"})
	if res.IsError || !strings.Contains(text(res), "--- stdout ---\n2\n") {
		t.Fatalf("execute_python reading data.csv from write_file: %s", text(res))
	}
	if res := s.call("read_file", map[string]any{"path": "result.txt"}); res.IsError || !strings.Contains(text(res), "1,2") {
		t.Errorf("read_file of what the program wrote: %s", text(res))
	}
	if res := s.call("execute_python", map[string]any{"code": "print(rows[0])"}); !strings.Contains(text(res), "a,b") {
		t.Errorf("variables across calls: %s", text(res))
	}
}

// mcp_code_executor's configs name a venv on the host (ENV_TYPE=venv-uv,
// UV_VENV_PATH; every run failed with exit 127): its packages are
// installed into the sandbox's venv, and the first result says so. Its
// CONDA_ENV_NAME alone (refused at start) runs in the sandbox's venv, and
// says how to use conda instead.
func TestHostVenvAndCondaSettings(t *testing.T) {
	layerTest(t)
	wh := testenv.Wheelhouse(t)
	venv := t.TempDir()
	os.WriteFile(filepath.Join(venv, "pyvenv.cfg"), []byte("home = /usr/bin\n"), 0o644)
	for name, version := range map[string]string{"pyboxdemo": "1.0", "pip": "24.0"} {
		dir := filepath.Join(venv, "lib", "python3.11", "site-packages", name+"-"+version+".dist-info")
		os.MkdirAll(dir, 0o755)
		os.WriteFile(filepath.Join(dir, "METADATA"), []byte("Metadata-Version: 2.1\nName: "+name+"\nVersion: "+version+"\n\nA package.\n"), 0o644)
	}
	s := packageServer(t, wh, "ENV_TYPE=venv-uv", "UV_VENV_PATH="+venv)
	out, res := s.exec(map[string]any{"code": "import pyboxdemo\nprint(pyboxdemo.answer())"})
	if out.Stdout != "42\n" || !strings.Contains(text(res), "is a venv on this host") || !strings.Contains(text(res), "pyboxdemo==1.0") {
		t.Errorf("a host venv's packages in the sandbox: %s", text(res))
	}
	c := startServer(t, "CONDA_ENV_NAME=myenv")
	out, res = c.exec(map[string]any{"code": "print('ok')"})
	if out.Stdout != "ok\n" || !strings.Contains(text(res), "CONDA_ENV_NAME=myenv") || !strings.Contains(text(res), "ENV_TYPE=conda") {
		t.Errorf("CONDA_ENV_NAME alone: %s", text(res))
	}
}

// Started as root with a code storage folder of a regular user, pybox never
// gives the folder away (it chowned it to 10001, locking its owner out):
// programs run as its owner, and the files they and the file tools make
// are the owner's.
func TestStorageOfARegularUserStaysTheirs(t *testing.T) {
	parallelTest(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	dir := filepath.Join(t.TempDir(), "code")
	os.Mkdir(dir, 0o755)
	const uid, gid = 4321, 4321
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, "CODE_STORAGE_DIR="+dir)
	out, res := s.exec(map[string]any{"code": "import os\nopen('made.txt', 'w').write('x')\nprint(os.getuid())"})
	if out.Stdout != "4321\n" {
		t.Errorf("programs run as uid %q; want the folder's owner 4321: %s", out.Stdout, text(res))
	}
	if res := s.call("write_file", map[string]any{"path": "sub/tool.txt", "content": "y"}); res.IsError {
		t.Fatalf("write_file: %s", text(res))
	}
	if res := s.call("execute_code", map[string]any{"code": "x = 1", "session_id": "desk"}); res.IsError {
		t.Errorf("a session: %s", text(res))
	}
	for _, p := range []string{dir, filepath.Join(dir, "made.txt"), filepath.Join(dir, "sub"), filepath.Join(dir, "sub", "tool.txt")} {
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil || st.Uid != uid {
			t.Errorf("%s: owner %d (%v); want %d", p, st.Uid, err, uid)
		}
	}
}
