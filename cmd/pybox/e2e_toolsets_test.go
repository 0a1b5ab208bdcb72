//go:build !windows

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pybox-dev/pybox/internal/testenv"
	"github.com/pybox-dev/pybox/tools"
)

// toolSnapshot is what a client sees of a tool.
type toolSnapshot struct {
	Name         string `json:"name"`
	Description  string `json:"description"`
	InputSchema  any    `json:"inputSchema"`
	OutputSchema any    `json:"outputSchema,omitempty"`
	Annotations  any    `json:"annotations,omitempty"`
}

// TestToolsetSnapshots: each tool set lists exactly its tools, pinned by a
// golden file (go test ./cmd/pybox -run Toolset -update after review).
func TestToolsetSnapshots(t *testing.T) {
	parallelTest(t)
	want := map[string][]string{
		"mcp-code-executor": {"append_to_code_file", "check_installed_packages", "configure_environment", "execute_code",
			"execute_code_file", "get_environment_config", "initialize_code_file", "install_dependencies", "read_code_file"},
		"mcp-executor":    {"execute_python", "install_package", "list_files", "read_file", "write_file"},
		"python-executor": {"execute_python", "health_check", "install_packages"},
	}
	for _, set := range tools.Toolsets() {
		t.Run(set, func(t *testing.T) {
			s := startServer(t, "PYBOX_TOOLSET="+set)
			var got []toolSnapshot
			for tool, err := range s.cs.Tools(t.Context(), nil) {
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, toolSnapshot{tool.Name, tool.Description, tool.InputSchema, tool.OutputSchema, tool.Annotations})
			}
			slices.SortFunc(got, func(a, b toolSnapshot) int { return strings.Compare(a.Name, b.Name) })
			var names []string
			for _, g := range got {
				names = append(names, g.Name)
			}
			if w, ok := want[set]; ok && !slices.Equal(names, w) {
				t.Errorf("tools %v, want exactly %v", names, w)
			}
			checkGolden(t, filepath.Join("testdata", "toolsets", set+".golden.json"), got)
		})
	}
}

func checkGolden(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	b = append(b, '\n')
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (create it with -update)", err)
	}
	if string(want) != string(b) {
		t.Errorf("tools/list differs from %s; if the change is intended, rerun with -update. Got:\n%s", path, b)
	}
}

// TestToolsetCalls: a call in each set's own argument style works.
func TestToolsetCalls(t *testing.T) {
	parallelTest(t)
	pkg, wh := testenv.OwnPackage(t, testenv.Docker(t)) // its own: no layer-cache lock
	serve := func(t *testing.T, set string) *server {
		return startServer(t, "PYBOX_WHEELHOUSE="+wh, "PYBOX_INSTALL_NETWORK=none", "PYBOX_TOOLSET="+set)
	}
	t.Run("mcp-code-executor", func(t *testing.T) {
		s := serve(t, "mcp-code-executor")
		out, _ := s.exec(map[string]any{"code": "print('hi')", "filename": "greet"})
		if out.Stdout != "hi\n" || !strings.Contains(filepath.Base(out.FilePath), "greet_") {
			t.Errorf("execute_code: %+v", out)
		}
	})
	t.Run("mcp-executor", func(t *testing.T) {
		s := serve(t, "mcp-executor")
		s.call("execute_python", map[string]any{"code": "total = 40"})
		if got := text(s.call("execute_python", map[string]any{"code": "print(total + 2)"})); !strings.Contains(got, "42") {
			t.Errorf("execute_python is not stateful: %s", got)
		}
		if res := s.call("install_package", map[string]any{"package": pkg}); res.IsError {
			t.Fatalf("install_package: %s", text(res))
		}
		if got := text(s.call("execute_python", map[string]any{"code": "import " + pkg + "; print(" + pkg + ".VERSION)"})); !strings.Contains(got, "1.0") {
			t.Errorf("after install_package: %s", got)
		}
		s.call("write_file", map[string]any{"path": "notes.txt", "content": "hello"})
		if got := text(s.call("read_file", map[string]any{"path": "notes.txt"})); !strings.Contains(got, "hello") {
			t.Errorf("read_file: %s", got)
		}
		if got := text(s.call("list_files", map[string]any{})); !strings.Contains(got, "notes.txt") {
			t.Errorf("list_files: %s", got)
		}
	})
	for _, set := range []string{"python-executor", "all"} {
		t.Run(set, func(t *testing.T) {
			s := serve(t, set)
			got := text(s.call("execute_python", map[string]any{"code": "a = input(); b = input(); print(a + b)", "inputData": []string{"fire", "fly"}}))
			if !strings.Contains(got, "firefly") {
				t.Errorf("execute_python with inputData: %s", got)
			}
			if res := s.call("install_packages", map[string]any{"packages": []string{pkg + "==1.0"}}); res.IsError {
				t.Errorf("install_packages: %s", text(res))
			}
			if got := text(s.call("execute_python", map[string]any{"code": "print(x)"})); !strings.Contains(got, "NameError") {
				t.Errorf("python-executor's execute_python must be stateless: %s", got)
			}
		})
	}
}

// TestUnknownToolset is a clear start-up error.
func TestUnknownToolset(t *testing.T) {
	parallelTest(t)
	_, stderr, code := runBinary(t, "", "serve", "--toolset", "everything")
	if code == 0 || !strings.Contains(stderr, "toolset") || !strings.Contains(stderr, "mcp-executor") {
		t.Errorf("exit %d stderr %q; want a clear error listing the sets", code, stderr)
	}
}
