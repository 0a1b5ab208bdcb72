package tools

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// pngBytes encodes a w x h image; noisy pixels barely compress, so a big
// one is big on disk.
func pngBytes(t *testing.T, w, h int, noisy bool) []byte {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	r := rand.New(rand.NewPCG(1, 2))
	for y := range h {
		for x := range w {
			c := color.NRGBA{R: uint8(x), G: uint8(y), B: 200, A: 255}
			if noisy {
				c = color.NRGBA{R: uint8(r.Uint32()), G: uint8(r.Uint32()), B: uint8(r.Uint32()), A: 255}
			}
			img.SetNRGBA(x, y, c)
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// putFile writes a file under the storage root directly on the host.
func putFile(t *testing.T, h *handlers, rel string, data []byte) {
	t.Helper()
	path := filepath.Join(h.cfg.Storage.Path(), rel)
	mustDo(t, os.MkdirAll(filepath.Dir(path), 0o755))
	mustDo(t, os.WriteFile(path, data, 0o644))
}

// imageContents returns a result's image contents.
func imageContents(res *mcp.CallToolResult) []*mcp.ImageContent {
	var out []*mcp.ImageContent
	for _, c := range res.Content {
		if ic, ok := c.(*mcp.ImageContent); ok {
			out = append(out, ic)
		}
	}
	return out
}

func TestReadFile(t *testing.T) {
	h := fileHandlers(t, 64, 2<<20)
	small, big := pngBytes(t, 32, 16, false), pngBytes(t, 600, 600, true)
	if len(big) < maxImageBytes {
		t.Fatalf("the big PNG is only %d bytes", len(big))
	}
	allBytes := make([]byte, 256)
	for i := range allBytes {
		allBytes[i] = byte(i)
	}
	putFile(t, h, "notes/a.txt", []byte("héllo\n"))
	putFile(t, h, "empty.txt", nil)
	putFile(t, h, "nul.txt", []byte("abc\x00def"))
	putFile(t, h, "latin1.txt", []byte("caf\xe9"))
	putFile(t, h, "all.bin", allBytes)
	putFile(t, h, "out/small.png", small)
	putFile(t, h, "out/big.png", big)
	tests := []struct {
		path      string
		want      ReadFileOutput
		wantImage bool
	}{
		{"notes/a.txt", ReadFileOutput{Path: "notes/a.txt", Content: "héllo\n", Bytes: 7}, false},
		{filepath.Join(h.cfg.Storage.Path(), "notes/a.txt"), ReadFileOutput{Path: "notes/a.txt", Content: "héllo\n", Bytes: 7}, false},
		{"empty.txt", ReadFileOutput{Path: "empty.txt"}, false},
		{"nul.txt", ReadFileOutput{Path: "nul.txt", Bytes: 7, Binary: true, MIMEType: "application/octet-stream"}, false},
		{"latin1.txt", ReadFileOutput{Path: "latin1.txt", Bytes: 4, Binary: true, MIMEType: "text/plain; charset=utf-8"}, false},
		{"all.bin", ReadFileOutput{Path: "all.bin", Bytes: 256, Binary: true, MIMEType: "application/octet-stream"}, false},
		{"out/small.png", ReadFileOutput{Path: "out/small.png", Bytes: int64(len(small)), Binary: true, MIMEType: "image/png"}, true},
		{"out/big.png", ReadFileOutput{Path: "out/big.png", Bytes: int64(len(big)), Binary: true, MIMEType: "image/png"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			res, got, err := h.readFile(t.Context(), nil, ReadFileInput{Path: tt.path})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("structured output (-want +got):\n%s", diff)
			}
			text := res.Content[0].(*mcp.TextContent).Text
			if tt.want.Binary && !strings.Contains(text, fmt.Sprintf("binary file, %d bytes, type %s", tt.want.Bytes, tt.want.MIMEType)) {
				t.Errorf("text %q does not describe the binary file", text)
			}
			if !tt.want.Binary && text != tt.want.Content {
				t.Errorf("text %q, want the file's content %q", text, tt.want.Content)
			}
			imgs := imageContents(res)
			if !tt.wantImage {
				if len(imgs) != 0 {
					t.Errorf("got %d images, want none", len(imgs))
				}
				return
			}
			if len(imgs) != 1 || imgs[0].MIMEType != "image/png" || !bytes.Equal(imgs[0].Data, small) {
				t.Errorf("want the PNG's bytes as one image/png content, got %d images", len(imgs))
			}
		})
	}
}

// TestReadFileTruncated: text is cut at the per-file limit (never inside a
// character) and flagged; a cut binary file keeps its real size and is not
// attached as an image.
func TestReadFileTruncated(t *testing.T) {
	h := fileHandlers(t, 64, 10)
	putFile(t, h, "long.txt", []byte("0123456789abcdef"))
	putFile(t, h, "runes.txt", []byte("123456789é")) // é straddles the limit
	img := pngBytes(t, 8, 8, false)
	putFile(t, h, "img.png", img)
	tests := []struct {
		path string
		want ReadFileOutput
	}{
		{"long.txt", ReadFileOutput{Path: "long.txt", Content: "0123456789", Bytes: 16, Truncated: true}},
		{"runes.txt", ReadFileOutput{Path: "runes.txt", Content: "123456789", Bytes: 11, Truncated: true}},
		{"img.png", ReadFileOutput{Path: "img.png", Bytes: int64(len(img)), Binary: true, MIMEType: "image/png"}},
	}
	for _, tt := range tests {
		res, got, err := h.readFile(t.Context(), nil, ReadFileInput{Path: tt.path})
		if diff := cmp.Diff(tt.want, got); diff != "" || err != nil {
			t.Errorf("read %s: %v (-want +got):\n%s", tt.path, err, diff)
			continue
		}
		text := res.Content[0].(*mcp.TextContent).Text
		if !tt.want.Binary && !strings.HasPrefix(text, tt.want.Content+"\n(truncated: only the first") {
			t.Errorf("read %s: text %q, want the content and a truncation note", tt.path, text)
		}
		if len(imageContents(res)) != 0 {
			t.Errorf("read %s: a cut file was attached as an image", tt.path)
		}
	}
}

func TestWriteFile(t *testing.T) {
	h := fileHandlers(t, 8, 32)
	root := h.cfg.Storage.Path()
	tests := []struct {
		name, path, content string
		wantPath            string
		wantErr             string
		wantFile            string // the file at wantPath afterwards
	}{
		{"new file and parents", "notes/deep/a.txt", "hello\n", "notes/deep/a.txt", "", "hello\n"},
		{"replace, absolute path", filepath.Join(root, "notes/deep/a.txt"), "bye\n", "notes/deep/a.txt", "", "bye\n"},
		{"empty content", "empty.txt", "", "empty.txt", "", ""},
		{"exactly the limit", "full.txt", strings.Repeat("x", 32), "full.txt", "", strings.Repeat("x", 32)},
		{"over the limit", "notes/deep/a.txt", strings.Repeat("y", 33), "notes/deep/a.txt", "per-file limit is 32 bytes; nothing was written", "bye\n"},
		{"parent is a file", "empty.txt/b.txt", "x", "empty.txt", "passes through a file", ""},
		{"traversal", "../escape.txt", "x", "", "outside the workspace", ""},
		{"empty path", "", "x", "", "invalid path", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, got, err := h.writeFile(t.Context(), nil, WriteFileInput{Path: tt.path, Content: tt.content})
			if tt.wantErr != "" {
				wantErr(t, "write_file", err, tt.wantErr)
			} else if want := (WriteFileOutput{Path: tt.wantPath, Bytes: int64(len(tt.content))}); err != nil || got != want {
				t.Errorf("write_file = %+v, %v; want %+v", got, err, want)
			}
			if tt.wantPath != "" {
				if file := readHost(t, filepath.Join(root, tt.wantPath)); file != tt.wantFile {
					t.Errorf("file holds %q, want %q", file, tt.wantFile)
				}
			}
		})
	}
	if _, err := os.Lstat(filepath.Join(filepath.Dir(root), "escape.txt")); !os.IsNotExist(err) {
		t.Errorf("the traversal wrote outside the workspace: %v", err)
	}
	fi, err := os.Stat(filepath.Join(root, "notes/deep/a.txt"))
	if err != nil || fi.Mode().Perm()&0o444 != 0o444 || fi.Mode().Perm()&0o022 != 0 {
		t.Errorf("written file mode %v, %v; want readable by all (the sandbox user), writable by no one else", fi.Mode(), err)
	}
	noTempFiles(t, root)
}

// TestWriteFileOwnsNewDirs: as root with a sandbox owner set, the parent
// directories write_file creates belong to the sandbox user, and existing
// ones keep their owner.
func TestWriteFileOwnsNewDirs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown needs root")
	}
	h := fileHandlers(t, 8, 32)
	root := h.cfg.Storage.Path()
	mustDo(t, os.Mkdir(filepath.Join(root, "keep"), 0o755))
	mustDo(t, h.cfg.Storage.SetOwner(10001, 10002))
	if _, _, err := h.writeFile(t.Context(), nil, WriteFileInput{Path: "keep/new/deeper/a.txt", Content: "x"}); err != nil {
		t.Fatal(err)
	}
	owners := map[string][2]uint32{"keep": {0, 0}, "keep/new": {10001, 10002}, "keep/new/deeper": {10001, 10002}}
	for rel, want := range owners {
		fi, err := os.Lstat(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		if got := fileOwner(t, fi); got != want || !fi.IsDir() {
			t.Errorf("%s owned by %v, want %v", rel, got, want)
		}
	}
}

func TestListFiles(t *testing.T) {
	h := fileHandlers(t, 8, 32)
	root := h.cfg.Storage.Path()
	putFile(t, h, "b.txt", []byte("12345"))
	putFile(t, h, "A.txt", []byte("1"))
	putFile(t, h, "sub/inner.txt", []byte("123"))
	putFile(t, h, ".pybox-tmp-0011223344aa", []byte("half-written"))
	mustDo(t, os.Symlink("sub", filepath.Join(root, "link")))
	mkfifo(t, filepath.Join(root, "pipe"))
	want := ListFilesOutput{Path: ".", Entries: []FileEntry{
		{Name: "A.txt", Type: "file", Size: 1},
		{Name: "b.txt", Type: "file", Size: 5},
		{Name: "link", Type: "symlink"},
		{Name: "pipe", Type: "other"},
		{Name: "sub", Type: "dir"},
	}}
	for _, p := range []string{"", ".", root, root + "/"} {
		res, got, err := h.listFiles(t.Context(), nil, ListFilesInput{Path: p})
		if diff := cmp.Diff(want, got); diff != "" || err != nil {
			t.Errorf("list_files %q: %v (-want +got):\n%s", p, err, diff)
			continue
		}
		text := res.Content[0].(*mcp.TextContent).Text
		if !strings.Contains(text, "sub/") || !strings.Contains(text, "b.txt") || strings.Contains(text, ".pybox-tmp-") {
			t.Errorf("list_files %q text:\n%s", p, text)
		}
	}
	_, got, err := h.listFiles(t.Context(), nil, ListFilesInput{Path: "sub"})
	if diff := cmp.Diff(ListFilesOutput{Path: "sub", Entries: []FileEntry{{Name: "inner.txt", Type: "file", Size: 3}}}, got); diff != "" || err != nil {
		t.Errorf("list_files sub: %v (-want +got):\n%s", err, diff)
	}
}

func TestListFilesTruncated(t *testing.T) {
	h := fileHandlers(t, 8, 32)
	for i := range maxListEntries + 5 {
		putFile(t, h, fmt.Sprintf("f%05d", maxListEntries+4-i), nil)
	}
	res, got, err := h.listFiles(t.Context(), nil, ListFilesInput{})
	if err != nil || len(got.Entries) != maxListEntries || !got.Truncated || got.Entries[0].Name != "f00000" || got.Entries[maxListEntries-1].Name != "f00999" {
		t.Fatalf("list_files: %d entries, truncated %v, %v; want the first %d by name", len(got.Entries), got.Truncated, err, maxListEntries)
	}
	if text := res.Content[0].(*mcp.TextContent).Text; !strings.Contains(text, "truncated") {
		t.Errorf("text does not say it was truncated:\n%s", text[len(text)-200:])
	}
}

// TestWorkspaceToolsRefuse: escapes, planted symlinks (out, in, to a
// directory), FIFOs and directories are clear tool errors from every
// workspace tool, returned promptly, and nothing outside changes.
func TestWorkspaceToolsRefuse(t *testing.T) {
	h := fileHandlers(t, 1<<10, 1<<20)
	root := h.cfg.Storage.Path()
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret.txt")
	mustDo(t, os.WriteFile(secret, []byte("host\n"), 0o644))
	putFile(t, h, "real.txt", []byte("inside\n"))
	putFile(t, h, "dir/x.txt", []byte("x"))
	mustDo(t, os.Symlink(secret, filepath.Join(root, "evil.txt")))
	mustDo(t, os.Symlink("real.txt", filepath.Join(root, "alias.txt")))
	mustDo(t, os.Symlink(outside, filepath.Join(root, "out")))
	mustDo(t, os.Symlink("dir", filepath.Join(root, "dirlink")))
	mkfifo(t, filepath.Join(root, "p"))
	const outsideMsg, notFile, notDir = "outside the workspace", "not a regular file", "not a directory"
	tests := []struct{ path, read, write, list string }{
		{"../../etc/passwd", outsideMsg, outsideMsg, outsideMsg},
		{"/etc/passwd", outsideMsg, outsideMsg, outsideMsg},
		{secret, outsideMsg, outsideMsg, outsideMsg},
		{"evil.txt", notFile, notFile, notDir},
		{"alias.txt", notFile, notFile, notDir},
		{"out", notFile, notFile, notDir},
		{"out/secret.txt", outsideMsg, outsideMsg, outsideMsg},
		{"out/new.txt", outsideMsg, outsideMsg, outsideMsg},
		{"dirlink", notFile, notFile, notDir},
		{"p", notFile, notFile, notDir},
		{"dir", notFile, notFile, ""},
		{"real.txt", "", "", notDir},
		{"missing", "not found: missing", "", "directory not found: missing"},
		{"a\x00b", "invalid path", "invalid path", "invalid path"},
	}
	ctx := t.Context()
	calls := map[string]func(p string) error{
		"read_file": func(p string) error { _, _, err := h.readFile(ctx, nil, ReadFileInput{Path: p}); return err },
		"write_file": func(p string) error {
			_, _, err := h.writeFile(ctx, nil, WriteFileInput{Path: p, Content: "pwned\n"})
			return err
		},
		"list_files": func(p string) error { _, _, err := h.listFiles(ctx, nil, ListFilesInput{Path: p}); return err },
	}
	for _, tt := range tests {
		for name, want := range map[string]string{"read_file": tt.read, "write_file": tt.write, "list_files": tt.list} {
			if want == "" {
				continue // this tool accepts the path
			}
			t.Run(name+"/"+tt.path, func(t *testing.T) {
				wantErr(t, name, promptly(t, func() error { return calls[name](tt.path) }), want)
			})
		}
	}
	if got := readHost(t, secret); got != "host\n" {
		t.Errorf("the outside file changed to %q", got)
	}
	if got := readHost(t, filepath.Join(root, "real.txt")); got != "inside\n" {
		t.Errorf("the inside symlink target changed to %q", got)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 1 {
		t.Errorf("the outside directory holds %d entries, want 1", len(entries))
	}
	for name, kind := range map[string]fs.FileMode{"evil.txt": fs.ModeSymlink, "alias.txt": fs.ModeSymlink, "out": fs.ModeSymlink, "dirlink": fs.ModeSymlink, "p": fs.ModeNamedPipe, "dir": fs.ModeDir} {
		if fi, err := os.Lstat(filepath.Join(root, name)); err != nil || fi.Mode().Type() != kind {
			t.Errorf("%s is no longer a %v: %v", name, kind, err)
		}
	}
	noTempFiles(t, root)
}

// TestWorkspaceToolsOverMCP registers the tools on a real MCP server and
// calls them through a client: the output schemas accept the results and
// an image reaches the client as image content.
func TestWorkspaceToolsOverMCP(t *testing.T) {
	h := fileHandlers(t, 1<<10, 1<<20)
	s := mcp.NewServer(&mcp.Implementation{Name: "test", Version: "test"}, nil)
	mcp.AddTool(s, readFileTool, h.readFile)
	mcp.AddTool(s, writeFileTool, h.writeFile)
	mcp.AddTool(s, listFilesTool, h.listFiles)
	st, ct := mcp.NewInMemoryTransports()
	ss, err := s.Connect(t.Context(), st, nil)
	mustDo(t, err)
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "test"}, nil).Connect(t.Context(), ct, nil)
	mustDo(t, err)
	t.Cleanup(func() { cs.Close() })
	call := func(name string, args map[string]any) *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %+v", name, err, res)
		}
		return res
	}
	call("write_file", map[string]any{"path": "notes/a.txt", "content": "hi\n"})
	if res := call("read_file", map[string]any{"path": "notes/a.txt"}); res.Content[0].(*mcp.TextContent).Text != "hi\n" {
		t.Errorf("read_file text = %q", res.Content[0].(*mcp.TextContent).Text)
	}
	img := pngBytes(t, 4, 4, false)
	putFile(t, h, "img.png", img)
	res := call("read_file", map[string]any{"path": "img.png"})
	if got := imageContents(res); len(got) != 1 || !bytes.Equal(got[0].Data, img) || got[0].MIMEType != "image/png" {
		t.Errorf("read_file img.png: %d images; want the PNG", len(got))
	}
	if sc, _ := res.StructuredContent.(map[string]any); sc["binary"] != true || sc["mime_type"] != "image/png" || sc["bytes"] != float64(len(img)) {
		t.Errorf("read_file img.png structured content = %v", res.StructuredContent)
	}
	if sc, _ := call("list_files", nil).StructuredContent.(map[string]any); len(sc["entries"].([]any)) != 2 {
		t.Errorf("list_files structured content = %v", sc)
	}
}

// noTempFiles fails when an atomic write left a temp file under root.
func noTempFiles(t *testing.T, root string) {
	t.Helper()
	filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(e.Name(), ".pybox-tmp-") {
			t.Errorf("temp file left behind: %s", p)
		}
		return nil
	})
}
