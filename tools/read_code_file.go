package tools

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

var readCodeFileTool = &mcp.Tool{
	Name: "read_code_file",
	Description: "Return the content of a file in code storage. file_path is absolute under the code-storage " +
		"directory or relative to it. Large files are cut at the per-file limit and flagged truncated; " +
		"symlinks and special files are refused.",
	Annotations: &mcp.ToolAnnotations{Title: "Read a code file", ReadOnlyHint: true, OpenWorldHint: new(bool)},
}

// ReadCodeFileInput are read_code_file's arguments.
type ReadCodeFileInput struct {
	FilePath string `json:"file_path" jsonschema:"the file, absolute under the code-storage directory or relative to it"`
}

// ReadCodeFileOutput is read_code_file's structured result.
type ReadCodeFileOutput struct {
	FilePath  string `json:"file_path" jsonschema:"absolute host path of the file in code storage"`
	Content   string `json:"content" jsonschema:"the file's content (cut at the per-file limit)"`
	Bytes     int64  `json:"bytes" jsonschema:"length of content in bytes (the file's size unless truncated)"`
	Truncated bool   `json:"truncated" jsonschema:"the file is larger than the limit and content was cut"`
}

func (h *handlers) readCodeFile(ctx context.Context, req *mcp.CallToolRequest, in ReadCodeFileInput) (*mcp.CallToolResult, ReadCodeFileOutput, error) {
	rel, err := h.resolve(ctx, in.FilePath)
	if err != nil {
		return nil, ReadCodeFileOutput{}, err
	}
	data, cut, err := h.cfg.Storage.Read(rel, int64(h.cfg.MaxFileBytes))
	if err != nil {
		return nil, ReadCodeFileOutput{}, h.fileError(ctx, "read the file", in.FilePath, err)
	}
	out := ReadCodeFileOutput{FilePath: h.cfg.Storage.Abs(rel), Content: string(data), Bytes: int64(len(data)), Truncated: cut}
	text := out.Content
	if cut {
		text += fmt.Sprintf("\n(truncated: only the first %d bytes are shown)\n", len(data))
	}
	return textResult(text), out, nil
}
