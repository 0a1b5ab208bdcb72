//go:build !windows

package main

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/pybox-dev/pybox/internal/testenv"
)

// inspector is the MCP Inspector CLI (npm @modelcontextprotocol/inspector,
// pinned at 0.16.0 by .ci/run, the version whose argument parsing is the
// strictest: it parses a list argument as JSON only when the property's
// schema type is exactly "array"). PYBOX_INSPECTOR names its binary.
func inspector(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("PYBOX_INSPECTOR")
	if bin == "" {
		if os.Getenv("CI") == "true" || os.Getenv("PYBOX_REQUIRE_DOCKER") == "1" {
			t.Fatal("PYBOX_INSPECTOR is not set: .ci/run installs the MCP Inspector CLI and sets it")
		}
		t.Skip("PYBOX_INSPECTOR is not set (the MCP Inspector CLI binary; .ci/run installs it)")
	}
	return bin
}

// Every tool that takes a list can be called from the MCP Inspector CLI
// with a JSON list (pybox declared ["null","array"], which it passed on as
// a string: "has type string, want one of null, array").
func TestInspectorCLIPassesLists(t *testing.T) {
	parallelTest(t)
	bin := inspector(t)
	testenv.RuntimeImage(t, testenv.Docker(t), "base")
	pkg, wh := testenv.OwnPackage(t, testenv.Docker(t)) // its own: no layer-cache lock
	cases := []struct {
		toolset, tool string
		args          []string
		want          string
	}{
		{"default", "check_installed_packages", []string{`packages=["pip","numpy"]`}, "pip: installed"},
		{"default", "install_dependencies", []string{`packages=["` + pkg + `"]`}, pkg},
		{"python-executor", "install_packages", []string{`packages=["` + pkg + `"]`}, pkg},
		{"python-executor", "execute_python", []string{`code=print(input() + input())`, `inputData=["4","2"]`}, "42"},
	}
	for _, c := range cases {
		t.Run(c.toolset+"/"+c.tool, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			args := []string{"--cli", pyboxBin, "serve", "--method", "tools/call", "--tool-name", c.tool}
			for _, a := range c.args {
				args = append(args, "--tool-arg", a)
			}
			cmd := exec.CommandContext(ctx, bin, args...)
			cmd.Env = append(os.Environ(), "CODE_STORAGE_DIR="+t.TempDir(), "PYBOX_STATE_DIR="+t.TempDir(), "PYBOX_BUILD=never",
				"PYBOX_TOOLSET="+c.toolset, "PYBOX_WHEELHOUSE="+wh, "PYBOX_INSTALL_NETWORK=none")
			out, err := cmd.CombinedOutput()
			if err != nil || strings.Contains(string(out), `"isError": true`) || !strings.Contains(string(out), c.want) {
				t.Errorf("inspector %s: %v\n%s", strings.Join(c.args, " "), err, out)
			}
		})
	}
}
