package tools

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"syscall"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pybox-dev/pybox/internal/storage"
)

var readFileTool = &mcp.Tool{
	Name: "read_file",
	Description: "Read a file in the workspace (the code-storage directory, mounted at /workspace in the sandbox). " +
		"path is relative to the workspace or absolute under it. Text (UTF-8) is returned as text, cut at the " +
		"per-file limit and flagged truncated. A binary file is described (size and MIME type), not dumped; a PNG, " +
		"JPEG, GIF or WebP image under 1 MiB is also returned as an image. Symlinks and special files are refused.",
	Annotations: &mcp.ToolAnnotations{Title: "Read a workspace file", ReadOnlyHint: true, OpenWorldHint: new(bool)},
}

// ReadFileInput are read_file's arguments (names as mcp-executor).
type ReadFileInput struct {
	Path string `json:"path" jsonschema:"the file, relative to the workspace or absolute under it"`
}

// ReadFileOutput is read_file's structured result.
type ReadFileOutput struct {
	Path      string `json:"path" jsonschema:"the file's path relative to the workspace"`
	Content   string `json:"content,omitempty" jsonschema:"the file's text, cut at the per-file limit; empty for a binary file"`
	Bytes     int64  `json:"bytes" jsonschema:"size of the file in bytes"`
	Truncated bool   `json:"truncated,omitempty" jsonschema:"the text file is larger than the limit and content was cut"`
	Binary    bool   `json:"binary,omitempty" jsonschema:"the file is not UTF-8 text; its content is not returned as text"`
	MIMEType  string `json:"mime_type,omitempty" jsonschema:"detected type of a binary file, e.g. image/png"`
}

// maxImageBytes is the size below which a PNG, JPEG, GIF or WebP file is
// returned as image content.
const maxImageBytes = 1 << 20

var imageTypes = map[string]bool{"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true}

func (h *handlers) readFile(ctx context.Context, req *mcp.CallToolRequest, in ReadFileInput) (*mcp.CallToolResult, ReadFileOutput, error) {
	rel, err := h.workspacePath(ctx, in.Path)
	if err != nil {
		return nil, ReadFileOutput{}, err
	}
	data, cut, err := h.cfg.Storage.Read(rel, int64(h.cfg.MaxFileBytes))
	if err != nil {
		return nil, ReadFileOutput{}, h.workspaceError(ctx, "read the file", in.Path, err)
	}
	size := h.readSize(rel, data, cut)
	if text, ok := asText(data, cut); ok {
		return textFileResult(rel, text, size, cut)
	}
	return binaryFileResult(rel, data, size, cut)
}

// readSize is the file's size: the bytes read, or for a cut read what the
// file holds now (at least one byte more than was read).
func (h *handlers) readSize(rel string, data []byte, cut bool) int64 {
	n := int64(len(data))
	if !cut {
		return n
	}
	if fi, err := h.cfg.Storage.Stat(rel); err == nil && fi.Size() > n {
		return fi.Size()
	}
	return n + 1
}

// asText returns data as text when it is UTF-8 without NUL bytes. A cut
// read may end inside a character, which is dropped.
func asText(data []byte, cut bool) (string, bool) {
	if cut {
		data = trimPartialRune(data)
	}
	if !utf8.Valid(data) || bytes.IndexByte(data, 0) >= 0 {
		return "", false
	}
	return string(data), true
}

// trimPartialRune drops an incomplete UTF-8 sequence at the end of data.
func trimPartialRune(data []byte) []byte {
	for i := len(data) - 1; i >= 0 && i >= len(data)-utf8.UTFMax; i-- {
		if utf8.RuneStart(data[i]) {
			if !utf8.FullRune(data[i:]) {
				return data[:i]
			}
			break
		}
	}
	return data
}

func textFileResult(rel, text string, size int64, cut bool) (*mcp.CallToolResult, ReadFileOutput, error) {
	out := ReadFileOutput{Path: rel, Content: text, Bytes: size, Truncated: cut}
	if cut {
		text += fmt.Sprintf("\n(truncated: only the first %d of %d bytes are shown)\n", len(out.Content), size)
	}
	return textResult(text), out, nil
}

// binaryFileResult describes a binary file and attaches it when it is a
// small image the model can look at.
func binaryFileResult(rel string, data []byte, size int64, cut bool) (*mcp.CallToolResult, ReadFileOutput, error) {
	mime := http.DetectContentType(data)
	out := ReadFileOutput{Path: rel, Bytes: size, Binary: true, MIMEType: mime}
	text := fmt.Sprintf("%s: binary file, %d bytes, type %s (not shown as text)", rel, size, mime)
	if !imageTypes[mime] || cut || size >= maxImageBytes {
		return textResult(text), out, nil
	}
	res := textResult(text + "; the image is attached")
	res.Content = append(res.Content, &mcp.ImageContent{Data: data, MIMEType: mime})
	return res, out, nil
}

// workspacePath turns a caller's path (relative to the workspace, or
// absolute under it) into a path relative to the root. It and
// workspaceError are shared by read_file, write_file and list_files.
func (h *handlers) workspacePath(ctx context.Context, p string) (string, error) {
	rel, err := h.rel(p)
	if err != nil {
		return "", h.workspaceError(ctx, "resolve the path", p, err)
	}
	return rel, nil
}

// workspaceError maps a storage failure on p to a tool error that names
// the workspace tools' argument (path); the rest goes to fileError.
func (h *handlers) workspaceError(ctx context.Context, what, p string, err error) error {
	switch {
	case errors.Is(err, syscall.ENOTDIR):
		return fmt.Errorf("path %s passes through a file (or a symlink) as if it were a directory; refused", p)
	case errors.Is(err, storage.ErrBadName):
		return fmt.Errorf("invalid path %.100q (%v): give a path in the workspace, relative to it or absolute under %s", p, err, h.cfg.Storage.Path())
	case errors.Is(err, storage.ErrOutside):
		return fmt.Errorf("path %s is outside the workspace (the code storage directory %s), or passes through a symlink that leads out of it; only files in the workspace can be used", p, h.cfg.Storage.Path())
	case errors.Is(err, storage.ErrNotFound):
		return fmt.Errorf("not found: %s (see what the workspace holds with list_files)", p)
	case errors.Is(err, storage.ErrNotFile):
		return fmt.Errorf("path %s is not a regular file; symlinks, directories, FIFOs, sockets and devices are refused", p)
	}
	return h.fileError(ctx, what, p, err)
}
