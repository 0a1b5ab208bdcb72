package tools

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pybox-dev/pybox/internal/storage"
	"github.com/pybox-dev/pybox/sandbox"
)

// FileOutput is the structured result of initialize_code_file and
// append_to_code_file.
type FileOutput struct {
	FilePath string `json:"file_path" jsonschema:"absolute host path of the file in code storage"`
	Bytes    int64  `json:"bytes" jsonschema:"size of the file in bytes after the call"`
}

// checkContent enforces the per-call cap on content sent to the file tools.
func (h *handlers) checkContent(content string) error {
	if limit := min(h.cfg.MaxCodeBytes, h.cfg.MaxFileBytes); len(content) > limit {
		return fmt.Errorf("content is %d bytes; the limit per call is %d bytes", len(content), limit)
	}
	return nil
}

// resolve turns a caller's file_path (absolute under the storage root, or
// relative to it) into a path relative to the root.
func (h *handlers) resolve(ctx context.Context, filePath string) (string, error) {
	rel, err := h.rel(filePath)
	if err != nil {
		return "", h.fileError(ctx, "resolve the file path", filePath, err)
	}
	return rel, nil
}

// rel is storage.Dir.Rel that also takes the path a file has inside the
// sandbox (/workspace/x.py, what tracebacks show) for the file in code
// storage.
func (h *handlers) rel(p string) (string, error) {
	rel, err := h.cfg.Storage.Rel(p)
	if inside, ok := strings.CutPrefix(p, sandbox.WorkspaceMount+"/"); ok && errors.Is(err, storage.ErrOutside) {
		return h.cfg.Storage.Rel(inside)
	}
	return rel, err
}

// fileError maps a storage failure on filePath to a tool error the model
// can act on; anything unexpected is logged and reported with an id.
func (h *handlers) fileError(ctx context.Context, what, filePath string, err error) error {
	switch {
	case errors.Is(err, storage.ErrBadName):
		return fmt.Errorf("invalid file_path %.100q (%v): give a file name in code storage (relative, or absolute under %s)", filePath, err, h.cfg.Storage.Path())
	case errors.Is(err, storage.ErrOutside):
		return fmt.Errorf("file_path %s is outside the code storage directory %s (or passes through a symlink that leads out of it); only files in code storage can be used", filePath, h.cfg.Storage.Path())
	case errors.Is(err, storage.ErrNotFound):
		return fmt.Errorf("file not found: %s; create it with initialize_code_file", filePath)
	case errors.Is(err, syscall.ENOTDIR):
		return fmt.Errorf("file_path %s passes through a file (or a symlink) as if it were a directory; refused", filePath)
	case errors.Is(err, storage.ErrNotFile):
		return fmt.Errorf("file_path %s is not a regular file; symlinks, directories, FIFOs, sockets and devices are refused", filePath)
	case errors.Is(err, storage.ErrTooLarge):
		return fmt.Errorf("file %s would exceed the per-file limit of %d bytes; it is unchanged", filePath, h.cfg.MaxFileBytes)
	}
	if full := storageFull(err); full != nil {
		return full
	}
	return h.internal(ctx, what, err)
}

// storageFull is err as a refusal for the storage quota when the
// filesystem refused the write for room (ENOSPC, EDQUOT: the owner's own
// quota filesystem is full, or the disk), nil otherwise: the client is
// told to make room, not that pybox failed.
func storageFull(err error) error {
	if sandbox.NoRoom(err) {
		return fmt.Errorf("%w: the storage is full (no space left on device), so nothing was written; delete files to make room", sandbox.ErrQuota)
	}
	return nil
}

// textResult is a successful result whose text the model reads.
func textResult(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}
