package tools

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pybox-dev/pybox/internal/storage"
)

var initializeCodeFileTool = &mcp.Tool{
	Name: "initialize_code_file",
	Description: "Create a new Python file in the code-storage directory (the container's /workspace) as " +
		"<filename>_<random>.py and return its path. Use it with append_to_code_file to build a program too " +
		"large for one call, then run it with execute_code_file.",
	Annotations: &mcp.ToolAnnotations{Title: "Create a code file", DestructiveHint: new(bool), OpenWorldHint: new(bool)},
}

// InitializeCodeFileInput are initialize_code_file's arguments.
type InitializeCodeFileInput struct {
	Content  string `json:"content" jsonschema:"initial content of the file"`
	Filename string `json:"filename,omitempty" jsonschema:"base name for the file (a random suffix and .py are added); default code"`
}

func (h *handlers) initializeCodeFile(ctx context.Context, req *mcp.CallToolRequest, in InitializeCodeFileInput) (*mcp.CallToolResult, FileOutput, error) {
	if err := h.checkContent(in.Content); err != nil {
		return nil, FileOutput{}, err
	}
	if err := h.room(h.cfg.Storage.Path(), int64(len(in.Content))); err != nil {
		return nil, FileOutput{}, err
	}
	name := storage.NewCodeName(in.Filename)
	if err := h.cfg.Storage.Create(name, []byte(in.Content)); err != nil {
		return nil, FileOutput{}, h.fileError(ctx, "create the file", name, err)
	}
	out := FileOutput{FilePath: h.cfg.Storage.Abs(name), Bytes: int64(len(in.Content))}
	return textResult(fmt.Sprintf("Created %s (%d bytes).", out.FilePath, out.Bytes)), out, nil
}
