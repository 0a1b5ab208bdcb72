package tools

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pybox-dev/pybox/internal/storage"
)

var listFilesTool = &mcp.Tool{
	Name: "list_files",
	Description: "List a directory of the workspace (the code-storage directory, mounted at /workspace in the sandbox): " +
		"each entry's name, type (file, dir, symlink, other) and size, sorted by name, at most 1000 entries. " +
		"path is relative to the workspace or absolute under it; default the workspace itself. Symlinks are listed, never followed.",
	Annotations: &mcp.ToolAnnotations{Title: "List workspace files", ReadOnlyHint: true, OpenWorldHint: new(bool)},
}

// maxListEntries caps the entries list_files returns.
const maxListEntries = 1000

// ListFilesInput are list_files' arguments (names as mcp-executor).
type ListFilesInput struct {
	Path string `json:"path,omitempty" jsonschema:"the directory, relative to the workspace or absolute under it; default the workspace"`
}

// ListFilesOutput is list_files' structured result.
type ListFilesOutput struct {
	Path      string      `json:"path" jsonschema:"the directory's path relative to the workspace (. is the workspace)"`
	Entries   []FileEntry `json:"entries" jsonschema:"the directory's entries sorted by name"`
	Truncated bool        `json:"truncated" jsonschema:"the directory holds more entries than were returned"`
}

// FileEntry is one entry of a list_files result.
type FileEntry struct {
	Name string `json:"name" jsonschema:"the entry's name"`
	Type string `json:"type" jsonschema:"file, dir, symlink or other (FIFO, socket, device)"`
	Size int64  `json:"size" jsonschema:"size in bytes (files only; 0 otherwise)"`
}

func (h *handlers) listFiles(ctx context.Context, req *mcp.CallToolRequest, in ListFilesInput) (*mcp.CallToolResult, ListFilesOutput, error) {
	p := in.Path
	if strings.TrimSpace(p) == "" {
		p = "."
	}
	rel, err := h.workspacePath(ctx, p)
	if err != nil {
		return nil, ListFilesOutput{}, err
	}
	entries, more, err := h.cfg.Storage.List(rel, maxListEntries)
	if err != nil {
		return nil, ListFilesOutput{}, h.listError(ctx, p, err)
	}
	out := ListFilesOutput{Path: rel, Entries: make([]FileEntry, 0, len(entries)), Truncated: more}
	for _, e := range entries {
		out.Entries = append(out.Entries, FileEntry{Name: e.Name, Type: e.Kind, Size: e.Size})
	}
	return textResult(listing(out)), out, nil
}

// listError words the refusals that differ for a directory.
func (h *handlers) listError(ctx context.Context, p string, err error) error {
	switch {
	case errors.Is(err, storage.ErrNotFile):
		return fmt.Errorf("path %s is not a directory; symlinks are listed but never followed, and files, FIFOs, sockets and devices cannot be listed", p)
	case errors.Is(err, storage.ErrNotFound):
		return fmt.Errorf("directory not found: %s", p)
	}
	return h.workspaceError(ctx, "list the directory", p, err)
}

// listing is the text form of a list_files result, one entry a line.
func listing(out ListFilesOutput) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d entries\n", out.Path, len(out.Entries))
	for _, e := range out.Entries {
		switch e.Type {
		case "file":
			fmt.Fprintf(&b, "file     %10d  %s\n", e.Size, e.Name)
		case "dir":
			fmt.Fprintf(&b, "dir      %10s  %s/\n", "", e.Name)
		default:
			fmt.Fprintf(&b, "%-7s  %10s  %s\n", e.Type, "", e.Name)
		}
	}
	if out.Truncated {
		fmt.Fprintf(&b, "(truncated: only the first %d entries by name are shown)\n", len(out.Entries))
	}
	return b.String()
}
