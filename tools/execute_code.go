package tools

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pybox-dev/pybox/internal/storage"
)

var executeCodeTool = &mcp.Tool{
	Name: "execute_code",
	Description: "Run Python 3 code in a fresh, isolated container and return stdout, stderr and the exit status. " +
		"The code is saved in the code-storage directory (the container's working directory, /workspace) as " +
		"<filename>_<random>.py and run there. No network; non-root; memory, CPU, process and time limits. " +
		"A failing program is a normal result with its exit code; a timeout kills the container and is reported as an error.",
	Annotations: &mcp.ToolAnnotations{Title: "Run Python code", OpenWorldHint: new(bool)},
}

// ExecuteCodeInput are execute_code's arguments (names as mcp_code_executor).
type ExecuteCodeInput struct {
	Code     string  `json:"code" jsonschema:"Python source code to run"`
	Filename string  `json:"filename,omitempty" jsonschema:"base name for the saved file (a random suffix and .py are added)"`
	Input    string  `json:"input,omitempty" jsonschema:"text fed to the program's standard input; without it input() raises EOFError at once"`
	TimeoutS float64 `json:"timeout_s,omitempty" jsonschema:"wall-clock limit in seconds; default and maximum are set by the server"`
}

func (h *handlers) executeCode(ctx context.Context, req *mcp.CallToolRequest, in ExecuteCodeInput) (*mcp.CallToolResult, ExecutionOutput, error) {
	if err := h.checkCode(in.Code); err != nil {
		return nil, ExecutionOutput{}, err
	}
	name := storage.NewCodeName(in.Filename)
	if err := h.cfg.Storage.Create(name, []byte(in.Code)); err != nil {
		return nil, ExecutionOutput{}, h.internal(ctx, "save code", err)
	}
	return h.run(ctx, runRequest{file: name, input: in.Input, timeoutS: in.TimeoutS})
}

// checkCode enforces the size cap on submitted code.
func (h *handlers) checkCode(code string) error {
	if len(code) > h.cfg.MaxCodeBytes {
		return fmt.Errorf("code is %d bytes; the limit is %d bytes", len(code), h.cfg.MaxCodeBytes)
	}
	return nil
}
