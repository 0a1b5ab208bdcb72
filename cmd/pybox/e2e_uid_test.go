//go:build linux

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/pybox-dev/pybox/internal/contract"
	"github.com/pybox-dev/pybox/tools"
)

// TestOwnUIDsShareStorage: as root each container runs as a uid of its
// own (so the kernel's per-uid budgets are per sandbox), and the code
// storage still works as one folder: what run A wrote, run B (another uid)
// reads, appends to, renames and adds to, and so do the file tools; a
// session's files stay its own after its kernel is replaced.
func TestOwnUIDsShareStorage(t *testing.T) { eachRuntime(t, testOwnUIDsShareStorage) }

func testOwnUIDsShareStorage(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("uids of their own need a server that runs as root")
	}
	s := startServer(t)
	a := s.mustRun(map[string]any{"code": "import os\nos.makedirs('sh/deep')\nopen('sh/deep/a.txt', 'w').write('A')\nprint(os.getuid())"})
	b := s.mustRun(map[string]any{"code": "import os\nopen('sh/deep/a.txt', 'a').write('B')\nopen('sh/deep/b.txt', 'w').write('b')\n" +
		"os.rename('sh/deep/b.txt', 'sh/b.txt')\nprint(os.getuid())"})
	if got := s.readFile("sh/deep/a.txt"); got != "AB" {
		t.Errorf("read_file of what runs A and B wrote: %q; want AB", got)
	}
	for _, p := range []string{"sh/deep/a.txt", "sh/tool/t.txt"} {
		if res := s.call("write_file", map[string]any{"path": p, "content": "T"}); res.IsError {
			t.Fatalf("write_file %s: %s", p, text(res))
		}
	}
	c := s.mustRun(map[string]any{"code": "import os\nfor p in ['sh/deep/a.txt', 'sh/tool/t.txt', 'sh/b.txt']:\n    open(p, 'a').write('C')\n" +
		"open('sh/tool/c.txt', 'w').write('c')\nprint(os.getuid(), *[open(p).read() for p in ['sh/deep/a.txt', 'sh/tool/t.txt', 'sh/b.txt']])"})
	checkOwnUIDs(t, a, b, c)
	if want := "TC TC bC"; !strings.HasSuffix(c, " "+want) {
		t.Errorf("run C: %q; want it to end with %q", c, want)
	}
	for _, p := range []string{"sh", "sh/deep", "sh/deep/a.txt", "sh/tool", "sh/tool/c.txt", "sh/b.txt"} {
		checkShared(t, filepath.Join(s.storage, p))
	}

	first := s.sessionRun("own", "import os\nos.makedirs('d')\nopen('d/f.txt', 'w').write('1')\nprint(os.getuid())")
	if lost := s.sessionRun("own", "while True: pass", "timeout_s", 1); !lost.SessionLost {
		t.Fatalf("the session's kernel was not replaced: %+v", lost)
	}
	next := s.sessionRun("own", "import os\nopen('d/f.txt', 'a').write('2')\nopen('d/g.txt', 'w').write('g')\nprint(os.getuid(), open('d/f.txt').read())")
	checkOwnUIDs(t, first.Stdout, next.Stdout)
	if !strings.HasSuffix(strings.TrimSpace(next.Stdout), " 12") {
		t.Errorf("the session's next kernel: %q %q; want its files 12", next.Stdout, next.Stderr)
	}
	for _, p := range []string{"d", "d/f.txt", "d/g.txt"} {
		checkShared(t, filepath.Join(s.state, "sessions", "own", p))
	}
}

// mustRun runs args with execute_code and returns its stdout, trimmed.
func (s *server) mustRun(args map[string]any) string {
	s.t.Helper()
	out, res := s.exec(args)
	if res.IsError || out.ExitCode != 0 {
		s.t.Fatalf("execute_code: %s", text(res))
	}
	return strings.TrimSpace(out.Stdout)
}

// readFile returns a file's content through read_file.
func (s *server) readFile(path string) string {
	s.t.Helper()
	res := s.call("read_file", map[string]any{"path": path})
	if res.IsError {
		s.t.Fatalf("read_file %s: %s", path, text(res))
	}
	return decode[tools.ReadFileOutput](s.t, res).Content
}

// checkOwnUIDs checks that each output starts with a distinct uid from
// pybox's own range.
func checkOwnUIDs(t *testing.T, outs ...string) {
	t.Helper()
	seen := map[int]bool{}
	for _, o := range outs {
		var uid int
		if _, err := fmt.Sscanf(o, "%d", &uid); err != nil || uid < contract.SandboxUIDBase || uid >= contract.SandboxUIDBase+contract.SandboxUIDCount || seen[uid] {
			t.Errorf("uids %q: want a uid of its own each, from %d on", outs, contract.SandboxUIDBase)
			return
		}
		seen[uid] = true
	}
}

// checkShared checks that p belongs to the sandbox group and that the
// group may write it (and, for a folder, that new entries stay the group's).
func checkShared(t *testing.T, p string) {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		t.Error(err)
		return
	}
	want := uint32(0o060)
	if st.Mode&syscall.S_IFDIR != 0 {
		want = 0o070 | syscall.S_ISGID
	}
	if st.Gid != 10001 || st.Mode&want != want {
		t.Errorf("%s: group %d, mode %o; want group 10001 and %o", p, st.Gid, st.Mode&0o7777, want)
	}
}
