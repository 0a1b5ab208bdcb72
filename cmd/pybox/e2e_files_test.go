//go:build !windows

package main

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pybox-dev/pybox/tools"
)

// fileOK calls a file tool and fails the test on a tool error.
func (s *server) fileOK(name string, args map[string]any) *mcp.CallToolResult {
	s.t.Helper()
	res := s.call(name, args)
	if res.IsError {
		s.t.Fatalf("%s: tool error: %s", name, text(res))
	}
	return res
}

// fileRefused calls a tool with a 20 s bound (a blocking open of a FIFO
// would hang) and fails unless it is a tool error mentioning want.
func (s *server) fileRefused(name string, args map[string]any, want string) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(s.t.Context(), 20*time.Second)
	defer cancel()
	res, err := s.cs.CallTool(ctx, callParams(name, args))
	switch {
	case err != nil:
		s.t.Errorf("%s %v: %v (a hang past 20s counts as a failure)", name, args, err)
	case !res.IsError || !strings.Contains(text(res), want):
		s.t.Errorf("%s %v: isError=%v text=%q; want a tool error mentioning %q", name, args, res.IsError, text(res), want)
	}
}

// TestCodeFileBigProgram builds a 10,000-line program with one
// initialize_code_file and 20 append_to_code_file calls, reads it back
// and runs it with execute_code_file.
func TestCodeFileBigProgram(t *testing.T) {
	parallelTest(t)
	s := startServer(t)
	want := "import atexit\ntotal = 0\natexit.register(lambda: print(total))\n"
	made := decode[tools.FileOutput](t, s.fileOK("initialize_code_file", map[string]any{"content": want, "filename": "big"}))
	if filepath.Dir(made.FilePath) != s.storage || !strings.HasPrefix(filepath.Base(made.FilePath), "big_") || made.Bytes != int64(len(want)) {
		t.Fatalf("initialize_code_file = %+v; want %s/big_<random>.py of %d bytes", made, s.storage, len(want))
	}
	for chunk := range 20 {
		var b strings.Builder
		for n := chunk*500 + 1; n <= (chunk+1)*500; n++ {
			fmt.Fprintf(&b, "total += %d\n", n)
		}
		want += b.String()
		path := made.FilePath
		if chunk%2 == 1 {
			path = filepath.Base(path) // relative to the storage root works too
		}
		got := decode[tools.FileOutput](t, s.fileOK("append_to_code_file", map[string]any{"file_path": path, "content": b.String()}))
		if got.Bytes != int64(len(want)) || got.FilePath != made.FilePath {
			t.Fatalf("append %d = %+v; want %d bytes at %s", chunk, got, len(want), made.FilePath)
		}
	}
	if host, err := os.ReadFile(made.FilePath); err != nil || string(host) != want || strings.Count(want, "total += ") != 10000 {
		t.Fatalf("host file: %d bytes, %v; want the %d-byte, 10,000-line program", len(host), err, len(want))
	}
	read := decode[tools.ReadCodeFileOutput](t, s.fileOK("read_code_file", map[string]any{"file_path": made.FilePath}))
	if read.Content != want || read.Truncated || read.Bytes != int64(len(want)) {
		t.Errorf("read_code_file: %d bytes, truncated=%v; want the whole %d-byte program", len(read.Content), read.Truncated, len(want))
	}
	out := decode[tools.ExecutionOutput](t, s.fileOK("execute_code_file", map[string]any{"file_path": made.FilePath}))
	if out.Stdout != "50005000\n" || out.ExitCode != 0 || out.FilePath != made.FilePath {
		t.Errorf("execute_code_file: exit %d stdout %q stderr %q file %s; want 50005000", out.ExitCode, out.Stdout, out.Stderr, out.FilePath)
	}
}

// TestCodeFileTools: missing files, stdin, timeouts and truncated reads.
func TestCodeFileTools(t *testing.T) {
	parallelTest(t)
	s := startServer(t, "PYBOX_MAX_CODE_SIZE=1k")
	s.fileRefused("append_to_code_file", map[string]any{"file_path": "nope.py", "content": "x = 1\n"}, "file not found: nope.py; create it with initialize_code_file")
	if _, err := os.Lstat(filepath.Join(s.storage, "nope.py")); !os.IsNotExist(err) {
		t.Errorf("appending to a missing file created it: %v", err)
	}
	s.fileRefused("read_code_file", map[string]any{"file_path": "nope.py"}, "file not found")
	s.fileRefused("execute_code_file", map[string]any{"file_path": "nope.py"}, "file not found")
	s.fileRefused("initialize_code_file", map[string]any{"content": strings.Repeat("#", 2048)}, "limit per call is 1024 bytes")

	greet := decode[tools.FileOutput](t, s.fileOK("initialize_code_file", map[string]any{"content": "a = input()\n", "filename": "greet"}))
	s.fileOK("append_to_code_file", map[string]any{"file_path": greet.FilePath, "content": "print('hi ' + a)\n"})
	s.fileRefused("append_to_code_file", map[string]any{"file_path": greet.FilePath, "content": strings.Repeat("#", 2048)}, "limit per call is 1024 bytes")
	out := decode[tools.ExecutionOutput](t, s.fileOK("execute_code_file", map[string]any{
		"file_path": filepath.Base(greet.FilePath), "input": "bob\n", "timeout_s": 30}))
	if out.Stdout != "hi bob\n" || out.ExitCode != 0 {
		t.Errorf("execute_code_file with input: exit %d stdout %q stderr %q", out.ExitCode, out.Stdout, out.Stderr)
	}

	loop := decode[tools.FileOutput](t, s.fileOK("initialize_code_file", map[string]any{"content": "print('started', flush=True)\nwhile True: pass\n"}))
	res := s.call("execute_code_file", map[string]any{"file_path": loop.FilePath, "timeout_s": 1})
	if timed := decode[tools.ExecutionOutput](t, res); !res.IsError || !timed.TimedOut || timed.Stdout != "started\n" {
		t.Errorf("execute_code_file with timeout_s 1: isError=%v timed_out=%v stdout %q; want a timeout tool error", res.IsError, timed.TimedOut, timed.Stdout)
	}
}

// TestCodeFileAttacks: paths out of code storage, and symlinks, a
// symlinked directory and a FIFO planted by sandboxed code, are each a
// tool error from every file tool; the host is untouched and the server
// still serves.
func TestCodeFileAttacks(t *testing.T) {
	parallelTest(t)
	s := startServer(t)
	watch := watchHost(t, "target.py", "/tmp/x.py")
	outside, target := watch.Outside, watch.Target
	plant := fmt.Sprintf(`import os
os.symlink('/etc/passwd', 'evil.py')
os.symlink(%q, 'evil2.py')
os.symlink('/tmp', 'd')
os.symlink(%q, 'o')
os.mkfifo('p.py')
print('planted')
`, target, outside)
	if out, res := s.exec(map[string]any{"code": plant}); res.IsError || out.Stdout != "planted\n" {
		t.Fatalf("planting from the sandbox: %s", text(res))
	}
	planted := map[string]fs.FileMode{"evil.py": fs.ModeSymlink, "evil2.py": fs.ModeSymlink, "d": fs.ModeSymlink, "o": fs.ModeSymlink, "p.py": fs.ModeNamedPipe}
	checkPlanted(t, s.storage, planted)

	const outsideMsg, special = "outside the code storage directory", "not a regular file"
	attacks := []struct{ path, want string }{
		{"../../etc/passwd", outsideMsg},
		{"/etc/passwd", outsideMsg},
		{target, outsideMsg},
		{"evil.py", special},
		{filepath.Join(s.storage, "evil.py"), special},
		{"evil2.py", special},
		{"d/x.py", outsideMsg},
		{"o/target.py", outsideMsg},
		{"p.py", special},
	}
	for _, a := range attacks {
		t.Run(strings.ReplaceAll(a.path, "/", "_"), func(t *testing.T) {
			s.fileRefused("read_code_file", map[string]any{"file_path": a.path}, a.want)
			s.fileRefused("append_to_code_file", map[string]any{"file_path": a.path, "content": "pwned = True\n"}, a.want)
			s.fileRefused("execute_code_file", map[string]any{"file_path": a.path, "timeout_s": 10}, a.want)
		})
	}

	watch.check()
	checkPlanted(t, s.storage, planted)
	if temps, _ := filepath.Glob(filepath.Join(s.storage, ".pybox-tmp-*")); len(temps) > 0 {
		t.Errorf("temp files left in code storage: %v", temps)
	}
	if out, res := s.exec(map[string]any{"code": "print('still serving')"}); res.IsError || out.Stdout != "still serving\n" {
		t.Errorf("after the attacks: %s", text(res))
	}
}

// checkPlanted verifies the entries the sandbox planted are still what they were.
func checkPlanted(t *testing.T, dir string, want map[string]fs.FileMode) {
	t.Helper()
	for name, kind := range want {
		fi, err := os.Lstat(filepath.Join(dir, name))
		if err != nil || fi.Mode().Type() != kind {
			t.Errorf("%s in code storage: %v, %v; want a %v", name, fi, err, kind)
		}
	}
}
