package tools

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pybox-dev/pybox/internal/storage"
)

// fileHandlers returns handlers over a fresh code storage (no sandbox: the
// file tools' refusals happen before anything runs).
func fileHandlers(t *testing.T, maxCode, maxFile int) *handlers {
	t.Helper()
	d, err := storage.Open(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return &handlers{cfg: Config{Storage: d, MaxCodeBytes: maxCode, MaxFileBytes: maxFile, Log: slog.New(slog.DiscardHandler)}}
}

func readHost(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func wantErr(t *testing.T, what string, err error, want string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("%s: error %v, want one containing %q", what, err, want)
	}
}

func TestInitializeCodeFile(t *testing.T) {
	h := fileHandlers(t, 64, 128)
	root := h.cfg.Storage.Path()
	tests := []struct {
		name, filename, content string
		wantPrefix              string
		wantErr                 string
	}{
		{"default name", "", "x = 1\n", "code_", ""},
		{"given name", "prog.py", "x = 2\n", "prog_", ""},
		{"traversal name stays inside", "../../etc/evil", "x = 3\n", "evil_", ""},
		{"empty content", "empty", "", "empty_", ""},
		{"content too large", "big", strings.Repeat("#", 65), "", "limit per call is 64 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, out, err := h.initializeCodeFile(t.Context(), nil, InitializeCodeFileInput{Content: tt.content, Filename: tt.filename})
			if tt.wantErr != "" {
				wantErr(t, "initialize", err, tt.wantErr)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if filepath.Dir(out.FilePath) != root || !strings.HasPrefix(filepath.Base(out.FilePath), tt.wantPrefix) {
				t.Errorf("file_path %q, want %s/%s<random>.py", out.FilePath, root, tt.wantPrefix)
			}
			if got := readHost(t, out.FilePath); got != tt.content || out.Bytes != int64(len(tt.content)) {
				t.Errorf("file holds %q (bytes %d), want %q", got, out.Bytes, tt.content)
			}
		})
	}
	entries, _ := os.ReadDir(root)
	if len(entries) != 4 {
		t.Errorf("code storage holds %d entries, want 4 (the refused call must write nothing)", len(entries))
	}
}

func TestAppendToCodeFile(t *testing.T) {
	h := fileHandlers(t, 16, 40)
	_, made, err := h.initializeCodeFile(t.Context(), nil, InitializeCodeFileInput{Content: "a = 1\n"})
	if err != nil {
		t.Fatal(err)
	}
	rel := filepath.Base(made.FilePath)
	const base = "a = 1\na += 1\na += 2\n"
	tests := []struct {
		name, path, content string
		wantBytes           int64
		wantErr             string
		wantFile            string
	}{
		{"relative", rel, "a += 1\n", 13, "", "a = 1\na += 1\n"},
		{"absolute", made.FilePath, "a += 2\n", 20, "", "a = 1\na += 1\na += 2\n"},
		{"content too large", rel, strings.Repeat("#", 17), 0, "limit per call is 16 bytes", base},
		{"fill", rel, strings.Repeat("#", 14) + "\n", 35, "", base + strings.Repeat("#", 14) + "\n"},
		{"file too large", rel, "#####\n", 0, "limit of 40 bytes", base + strings.Repeat("#", 14) + "\n"},
		{"fits exactly", rel, "####\n", 40, "", base + strings.Repeat("#", 14) + "\n####\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, out, err := h.appendToCodeFile(t.Context(), nil, AppendToCodeFileInput{FilePath: tt.path, Content: tt.content})
			if tt.wantErr != "" {
				wantErr(t, "append", err, tt.wantErr)
			} else if err != nil || out.Bytes != tt.wantBytes || out.FilePath != made.FilePath {
				t.Errorf("append = %+v, %v; want bytes %d at %s", out, err, tt.wantBytes, made.FilePath)
			}
			if got := readHost(t, made.FilePath); got != tt.wantFile {
				t.Errorf("file holds %q, want %q", got, tt.wantFile)
			}
		})
	}
	_, _, err = h.appendToCodeFile(t.Context(), nil, AppendToCodeFileInput{FilePath: "nope.py", Content: "x"})
	wantErr(t, "append to a missing file", err, "file not found: nope.py; create it with initialize_code_file")
}

func TestReadCodeFile(t *testing.T) {
	h := fileHandlers(t, 64, 10)
	if err := h.cfg.Storage.Create("short.py", []byte("print(1)\n")); err != nil {
		t.Fatal(err)
	}
	if err := h.cfg.Storage.Create("long.py", []byte("print(12345)\n")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path          string
		want          string
		wantTruncated bool
	}{
		{"short.py", "print(1)\n", false},
		{filepath.Join(h.cfg.Storage.Path(), "short.py"), "print(1)\n", false},
		{"long.py", "print(1234", true},
	}
	for _, tt := range tests {
		res, out, err := h.readCodeFile(t.Context(), nil, ReadCodeFileInput{FilePath: tt.path})
		if err != nil || out.Content != tt.want || out.Truncated != tt.wantTruncated || out.Bytes != int64(len(tt.want)) {
			t.Errorf("read %s = %+v, %v; want content %q truncated %v", tt.path, out, err, tt.want, tt.wantTruncated)
			continue
		}
		text := res.Content[0].(*mcp.TextContent).Text
		if !strings.HasPrefix(text, tt.want) || strings.Contains(text, "truncated") != tt.wantTruncated {
			t.Errorf("read %s: text %q, want the content and a truncation note only when cut", tt.path, text)
		}
	}
}

// TestFileToolsRefuse: every path the sandbox or a caller could use to
// reach outside code storage, or to block the server, is a clear tool
// error from each file tool, returned promptly, and nothing changes.
func TestFileToolsRefuse(t *testing.T) {
	h := fileHandlers(t, 1<<10, 1<<20)
	root := h.cfg.Storage.Path()
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret.py")
	if err := os.WriteFile(secret, []byte("host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustDo(t, os.WriteFile(filepath.Join(root, "real.py"), []byte("inside\n"), 0o644))
	mustDo(t, os.Symlink(secret, filepath.Join(root, "evil.py")))
	mustDo(t, os.Symlink("real.py", filepath.Join(root, "alias.py")))
	mustDo(t, os.Symlink(outside, filepath.Join(root, "d")))
	mkfifo(t, filepath.Join(root, "p.py"))
	mustDo(t, os.Mkdir(filepath.Join(root, "dir.py"), 0o755))
	tests := []struct{ path, want string }{
		{"../../etc/passwd", "outside the code storage directory"},
		{"/etc/passwd", "outside the code storage directory"},
		{secret, "outside the code storage directory"},
		{"evil.py", "not a regular file"},
		{"alias.py", "not a regular file"},
		{"d/secret.py", "outside the code storage directory"},
		{"p.py", "not a regular file"},
		{"dir.py", "not a regular file"},
		{"", "invalid file_path"},
		{"missing.py", "file not found: missing.py"},
	}
	ctx := t.Context()
	tools := map[string]func(p string) error{
		"read_code_file": func(p string) error {
			_, _, err := h.readCodeFile(ctx, nil, ReadCodeFileInput{FilePath: p})
			return err
		},
		"append_to_code_file": func(p string) error {
			_, _, err := h.appendToCodeFile(ctx, nil, AppendToCodeFileInput{FilePath: p, Content: "pwned\n"})
			return err
		},
		"execute_code_file": func(p string) error {
			_, _, err := h.executeCodeFile(ctx, nil, ExecuteCodeFileInput{FilePath: p})
			return err
		},
	}
	for _, tt := range tests {
		for name, call := range tools {
			t.Run(name+"/"+tt.path, func(t *testing.T) {
				wantErr(t, name, promptly(t, func() error { return call(tt.path) }), tt.want)
			})
		}
	}
	if got := readHost(t, secret); got != "host\n" {
		t.Errorf("the outside file changed to %q", got)
	}
	if got := readHost(t, filepath.Join(root, "real.py")); got != "inside\n" {
		t.Errorf("the inside symlink target changed to %q", got)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 1 {
		t.Errorf("the outside directory holds %d entries, want 1", len(entries))
	}
}

func mustDo(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// promptly runs f and fails the test if it blocks (a FIFO opened for a
// blocking read would never return).
func promptly(t *testing.T, f func() error) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		t.Fatal("the call blocked for 5s")
		return nil
	}
}
