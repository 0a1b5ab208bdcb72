//go:build !windows

package main

import (
	"strings"
	"testing"

	"github.com/pybox-dev/pybox/tools"
)

// TestOutputsFolderReplaced: a program that replaces the workspace's
// outputs folder with a file or a symlink does not break later runs: they
// still run (and say why output files are not collected). The pool is off,
// so the next run's container is made after the replacement.
func TestOutputsFolderReplaced(t *testing.T) {
	parallelTest(t)
	s := startServer(t, "PYBOX_WARM_POOL=0")
	for _, replace := range []string{
		"open('outputs', 'w').close()",
		"os.symlink('/etc', 'outputs')",
	} {
		// outputs/ holds this run's own folder (a mount): it cannot be
		// removed from inside, but it can be moved away.
		code := "import os\nif os.path.islink('outputs') or os.path.isfile('outputs'):\n    os.remove('outputs')\n" +
			"else:\n    os.rename('outputs', 'outputs-%d' % os.getpid())\n" + replace + "\n"
		if out := decode[tools.ExecutionOutput](t, s.call("execute_code", map[string]any{"code": code})); out.ExitCode != 0 {
			t.Fatalf("%s: %+v", replace, out)
		}
		res := s.call("execute_code", map[string]any{"code": "print('next run')"})
		if res.IsError || !strings.Contains(text(res), "next run") || !strings.Contains(text(res), "not collected") {
			t.Errorf("the run after %s: isError=%v %q; want it to run and say output files are not collected", replace, res.IsError, text(res))
		}
	}
}
