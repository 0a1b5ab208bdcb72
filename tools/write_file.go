package tools

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

var writeFileTool = &mcp.Tool{
	Name: "write_file",
	Description: "Write a text file in the workspace (the code-storage directory, mounted at /workspace in the sandbox), " +
		"replacing it if it exists and creating parent directories. path is relative to the workspace or absolute " +
		"under it. The write is atomic; symlinks, directories and special files are never written through.",
	Annotations: &mcp.ToolAnnotations{Title: "Write a workspace file", DestructiveHint: new(true), IdempotentHint: true, OpenWorldHint: new(bool)},
}

// WriteFileInput are write_file's arguments (names as mcp-executor).
type WriteFileInput struct {
	Path    string `json:"path" jsonschema:"the file, relative to the workspace or absolute under it"`
	Content string `json:"content" jsonschema:"the file's new content"`
}

// WriteFileOutput is write_file's structured result.
type WriteFileOutput struct {
	Path  string `json:"path" jsonschema:"the file's path relative to the workspace"`
	Bytes int64  `json:"bytes" jsonschema:"size of the file in bytes"`
}

func (h *handlers) writeFile(ctx context.Context, req *mcp.CallToolRequest, in WriteFileInput) (*mcp.CallToolResult, WriteFileOutput, error) {
	if len(in.Content) > h.cfg.MaxFileBytes {
		return nil, WriteFileOutput{}, fmt.Errorf("content is %d bytes; the per-file limit is %d bytes; nothing was written", len(in.Content), h.cfg.MaxFileBytes)
	}
	rel, err := h.workspacePath(ctx, in.Path)
	if err != nil {
		return nil, WriteFileOutput{}, err
	}
	if err := h.room(h.cfg.Storage.Path(), int64(len(in.Content))); err != nil {
		return nil, WriteFileOutput{}, err
	}
	if err := h.cfg.Storage.Write(rel, []byte(in.Content)); err != nil {
		return nil, WriteFileOutput{}, h.workspaceError(ctx, "write the file", in.Path, err)
	}
	out := WriteFileOutput{Path: rel, Bytes: int64(len(in.Content))}
	return textResult(fmt.Sprintf("Wrote %d bytes to %s.", out.Bytes, rel)), out, nil
}
