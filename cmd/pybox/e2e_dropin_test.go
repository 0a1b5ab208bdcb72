package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/pybox-dev/pybox/tools"
)

// Calls written for mcp_code_executor work unchanged: execute_code_file
// takes the container path its tracebacks show (/workspace/x.py), and
// configure_environment takes uv_venv_path.
func TestMCPCodeExecutorCallsWorkUnchanged(t *testing.T) {
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
