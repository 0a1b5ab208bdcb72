//go:build !windows

package main

import (
	"bytes"
	"fmt"
	"image/png"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pybox-dev/pybox/tools"
)

// makeFiles is run in the sandbox: it reads the file write_file made,
// writes next to it (so the directory write_file created must be the
// sandbox user's), and writes a PNG (pure zlib/struct) and raw bytes.
const makeFiles = `import os, struct, zlib
print(open('notes/a.txt').read(), end='')
with open('notes/b.txt', 'w') as f:
    f.write('from the sandbox\n')
def chunk(kind, data):
    return struct.pack('>I', len(data)) + kind + data + struct.pack('>I', zlib.crc32(kind + data))
w, h = 4, 3
raw = b''.join(b'\x00' + bytes([255, 0, 0]) * w for _ in range(h))
png = (b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', w, h, 8, 2, 0, 0, 0))
       + chunk(b'IDAT', zlib.compress(raw)) + chunk(b'IEND', b''))
os.makedirs('out', exist_ok=True)
with open('out/red.png', 'wb') as f:
    f.write(png)
with open('out/all.bin', 'wb') as f:
    f.write(bytes(range(256)))
`

// TestWorkspaceFiles: write_file and read_file round trip; the sandbox
// reads what write_file wrote and writes beside it; read_file reports the
// sandbox's binary files (and shows its PNG as an image); list_files
// shows all of it.
func TestWorkspaceFiles(t *testing.T) {
	parallelTest(t)
	s := startServer(t)
	const note = "hello from the host\nsecond line é\n"
	wrote := decode[tools.WriteFileOutput](t, s.fileOK("write_file", map[string]any{"path": "notes/a.txt", "content": note}))
	if want := (tools.WriteFileOutput{Path: "notes/a.txt", Bytes: int64(len(note))}); wrote != want {
		t.Errorf("write_file = %+v, want %+v", wrote, want)
	}
	if host, err := os.ReadFile(filepath.Join(s.storage, "notes/a.txt")); string(host) != note {
		t.Fatalf("host file after write_file: %q, %v", host, err)
	}
	read := decode[tools.ReadFileOutput](t, s.fileOK("read_file", map[string]any{"path": filepath.Join(s.storage, "notes/a.txt")}))
	if want := (tools.ReadFileOutput{Path: "notes/a.txt", Content: note, Bytes: int64(len(note))}); read != want {
		t.Errorf("read_file = %+v, want %+v", read, want)
	}

	if out, res := s.exec(map[string]any{"code": makeFiles}); res.IsError || out.ExitCode != 0 || out.Stdout != note {
		t.Fatalf("the sandbox reading and writing files: exit %d stdout %q stderr %q %s", out.ExitCode, out.Stdout, out.Stderr, text(res))
	}
	if got := decode[tools.ReadFileOutput](t, s.fileOK("read_file", map[string]any{"path": "notes/b.txt"})); got.Content != "from the sandbox\n" || got.Binary {
		t.Errorf("read_file notes/b.txt = %+v", got)
	}
	checkBinary(t, s, "out/all.bin", "application/octet-stream", false)
	checkBinary(t, s, "out/red.png", "image/png", true)

	checkListing(t, s, "notes", []tools.FileEntry{{Name: "a.txt", Type: "file", Size: int64(len(note))}, {Name: "b.txt", Type: "file", Size: 17}})
	checkListing(t, s, "out", []tools.FileEntry{{Name: "all.bin", Type: "file", Size: 256}, {Name: "red.png", Type: "file", Size: hostSize(t, s, "out/red.png")}})
	root := decode[tools.ListFilesOutput](t, s.fileOK("list_files", nil))
	if !hasEntry(root, "notes", "dir") || !hasEntry(root, "out", "dir") || root.Path != "." || root.Truncated {
		t.Errorf("list_files of the workspace = %+v; want notes and out as directories", root)
	}
}

// checkBinary reads a binary file the sandbox wrote: described with its
// size and type, its bytes attached only when it is an image.
func checkBinary(t *testing.T, s *server, rel, mime string, image bool) {
	t.Helper()
	host, err := os.ReadFile(filepath.Join(s.storage, rel))
	if err != nil {
		t.Fatal(err)
	}
	res := s.fileOK("read_file", map[string]any{"path": rel})
	want := tools.ReadFileOutput{Path: rel, Bytes: int64(len(host)), Binary: true, MIMEType: mime}
	if diff := cmp.Diff(want, decode[tools.ReadFileOutput](t, res)); diff != "" {
		t.Errorf("read_file %s (-want +got):\n%s", rel, diff)
	}
	if desc := fmt.Sprintf("binary file, %d bytes, type %s", len(host), mime); !strings.Contains(text(res), desc) {
		t.Errorf("read_file %s text %q, want it to say %q", rel, text(res), desc)
	}
	var imgs []*mcp.ImageContent
	for _, c := range res.Content {
		if ic, ok := c.(*mcp.ImageContent); ok {
			imgs = append(imgs, ic)
		}
	}
	switch {
	case !image && len(imgs) > 0:
		t.Errorf("read_file %s attached %d images, want none", rel, len(imgs))
	case image && (len(imgs) != 1 || imgs[0].MIMEType != mime || !bytes.Equal(imgs[0].Data, host)):
		t.Errorf("read_file %s: %d images; want the file's bytes as one %s image", rel, len(imgs), mime)
	case image:
		if cfg, err := png.DecodeConfig(bytes.NewReader(imgs[0].Data)); err != nil || cfg.Width != 4 || cfg.Height != 3 {
			t.Errorf("the attached PNG decodes as %+v, %v; want 4x3", cfg, err)
		}
	}
}

func checkListing(t *testing.T, s *server, dir string, want []tools.FileEntry) {
	t.Helper()
	got := decode[tools.ListFilesOutput](t, s.fileOK("list_files", map[string]any{"path": dir}))
	if diff := cmp.Diff(tools.ListFilesOutput{Path: dir, Entries: want}, got); diff != "" {
		t.Errorf("list_files %s (-want +got):\n%s", dir, diff)
	}
}

func hasEntry(out tools.ListFilesOutput, name, kind string) bool {
	for _, e := range out.Entries {
		if e.Name == name {
			return e.Type == kind
		}
	}
	return false
}

func hostSize(t *testing.T, s *server, rel string) int64 {
	t.Helper()
	fi, err := os.Stat(filepath.Join(s.storage, rel))
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// TestWorkspaceAttacks: paths out of the workspace, and symlinks, a
// symlinked directory and a FIFO planted by sandboxed code, are each a
// clear tool error from read_file, write_file and list_files, returned
// promptly; size caps hold; the host is untouched and the server serves.
func TestWorkspaceAttacks(t *testing.T) {
	parallelTest(t)
	s := startServer(t, "PYBOX_MAX_FILE_SIZE=1k")
	watch := watchHost(t, "target.txt", "/tmp/x.txt")
	outside, target := watch.Outside, watch.Target
	plant := fmt.Sprintf(`import os
os.symlink('/etc/passwd', 'passwd.txt')
os.symlink(%q, 'evil.txt')
os.symlink(%q, 'o')
os.symlink('/tmp', 'd')
os.mkfifo('p')
with open('big.txt', 'w') as f:
    f.write('x' * 3000)
print('planted')
`, target, outside)
	if out, res := s.exec(map[string]any{"code": plant}); res.IsError || out.Stdout != "planted\n" {
		t.Fatalf("planting from the sandbox: %s %s", out.Stderr, text(res))
	}
	planted := map[string]fs.FileMode{"passwd.txt": fs.ModeSymlink, "evil.txt": fs.ModeSymlink, "o": fs.ModeSymlink, "d": fs.ModeSymlink, "p": fs.ModeNamedPipe}
	checkPlanted(t, s.storage, planted)

	const outsideMsg, notFile, notDir = "outside the workspace", "not a regular file", "not a directory"
	attacks := []struct{ path, read, write, list string }{
		{"../../etc/passwd", outsideMsg, outsideMsg, outsideMsg},
		{"/etc/passwd", outsideMsg, outsideMsg, outsideMsg},
		{target, outsideMsg, outsideMsg, outsideMsg},
		{"passwd.txt", notFile, notFile, notDir},
		{"evil.txt", notFile, notFile, notDir},
		{filepath.Join(s.storage, "evil.txt"), notFile, notFile, notDir},
		{"o", notFile, notFile, notDir},
		{"o/target.txt", outsideMsg, outsideMsg, outsideMsg},
		{"o/new.txt", outsideMsg, outsideMsg, outsideMsg},
		{"d", notFile, notFile, notDir},
		{"d/x.txt", outsideMsg, outsideMsg, outsideMsg},
		{"p", notFile, notFile, notDir},
	}
	for _, a := range attacks {
		t.Run(strings.ReplaceAll(a.path, "/", "_"), func(t *testing.T) {
			s.fileRefused("read_file", map[string]any{"path": a.path}, a.read)
			s.fileRefused("write_file", map[string]any{"path": a.path, "content": "pwned\n"}, a.write)
			s.fileRefused("list_files", map[string]any{"path": a.path}, a.list)
		})
	}
	s.fileRefused("write_file", map[string]any{"path": "big2.txt", "content": strings.Repeat("y", 2048)}, "per-file limit is 1024 bytes")
	if big := decode[tools.ReadFileOutput](t, s.fileOK("read_file", map[string]any{"path": "big.txt"})); len(big.Content) != 1024 || big.Bytes != 3000 || !big.Truncated {
		t.Errorf("read_file big.txt: %d bytes of content, bytes %d, truncated %v; want 1024 of 3000, truncated", len(big.Content), big.Bytes, big.Truncated)
	}

	watch.check()
	checkPlanted(t, s.storage, planted)
	if _, err := os.Lstat(filepath.Join(s.storage, "big2.txt")); err == nil {
		t.Errorf("the refused oversized write created big2.txt")
	}
	if temps, _ := filepath.Glob(filepath.Join(s.storage, ".pybox-tmp-*")); len(temps) > 0 {
		t.Errorf("temp files left in the workspace: %v", temps)
	}
	root := decode[tools.ListFilesOutput](t, s.fileOK("list_files", map[string]any{}))
	if !hasEntry(root, "o", "symlink") || !hasEntry(root, "d", "symlink") || !hasEntry(root, "p", "other") || !hasEntry(root, "big.txt", "file") {
		t.Errorf("list_files after the attacks = %+v; want o and d as symlinks, p as other", root.Entries)
	}
	if out, res := s.exec(map[string]any{"code": "print('still serving')"}); res.IsError || out.Stdout != "still serving\n" {
		t.Errorf("after the attacks: %s", text(res))
	}
}
