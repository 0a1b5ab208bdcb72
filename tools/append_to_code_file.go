package tools

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

var appendToCodeFileTool = &mcp.Tool{
	Name: "append_to_code_file",
	Description: "Append content to an existing file in code storage (made by initialize_code_file or execute_code) " +
		"and return its new size. file_path is absolute under the code-storage directory or relative to it. " +
		"The file is rewritten atomically; symlinks and special files are refused.",
	Annotations: &mcp.ToolAnnotations{Title: "Append to a code file", DestructiveHint: new(bool), OpenWorldHint: new(bool)},
}

// AppendToCodeFileInput are append_to_code_file's arguments.
type AppendToCodeFileInput struct {
	FilePath string `json:"file_path" jsonschema:"the file, absolute under the code-storage directory or relative to it"`
	Content  string `json:"content" jsonschema:"text added at the end of the file (include a leading newline if needed)"`
}

func (h *handlers) appendToCodeFile(ctx context.Context, req *mcp.CallToolRequest, in AppendToCodeFileInput) (*mcp.CallToolResult, FileOutput, error) {
	if err := h.checkContent(in.Content); err != nil {
		return nil, FileOutput{}, err
	}
	rel, err := h.resolve(ctx, in.FilePath)
	if err != nil {
		return nil, FileOutput{}, err
	}
	if err := h.room(h.cfg.Storage.Path(), int64(len(in.Content))); err != nil {
		return nil, FileOutput{}, err
	}
	size, err := h.cfg.Storage.Append(rel, []byte(in.Content), int64(h.cfg.MaxFileBytes))
	if err != nil {
		return nil, FileOutput{}, h.fileError(ctx, "append to the file", in.FilePath, err)
	}
	out := FileOutput{FilePath: h.cfg.Storage.Abs(rel), Bytes: size}
	return textResult(fmt.Sprintf("Appended %d bytes to %s; it now holds %d bytes.", len(in.Content), out.FilePath, size)), out, nil
}
