package main

import (
	"strings"
	"testing"
)

// TestOutputsFolderReplaced: a program that replaces the workspace's
// outputs folder with a file or a symlink does not break later runs: they
// still run (and say why output files are not collected).
func TestOutputsFolderReplaced(t *testing.T) {
	s := startServer(t)
	for _, replace := range []string{
		"open('outputs', 'w').close()",
		"os.symlink('/etc', 'outputs')",
	} {
		code := "import os, shutil\nif os.path.islink('outputs') or os.path.isfile('outputs'):\n    os.remove('outputs')\n" +
			"shutil.rmtree('outputs', ignore_errors=True)\n" + replace + "\n"
		if res := s.call("execute_code", map[string]any{"code": code}); res.IsError {
			t.Fatalf("%s: %s", replace, text(res))
		}
		res := s.call("execute_code", map[string]any{"code": "print('next run')"})
		if res.IsError || !strings.Contains(text(res), "next run") || !strings.Contains(text(res), "not collected") {
			t.Errorf("the run after %s: isError=%v %q; want it to run and say output files are not collected", replace, res.IsError, text(res))
		}
	}
}
