package tools

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pybox-dev/pybox/internal/storage"
)

var executeCodeFileTool = &mcp.Tool{
	Name: "execute_code_file",
	Description: "Run a Python file from code storage in a fresh, isolated container (or, with session_id, in that " +
		"stateful session), exactly like execute_code, " +
		"and return stdout, stderr and the exit status. file_path is absolute under the code-storage directory, " +
		"relative to it, or the path the file has in the sandbox (/workspace/x.py, as tracebacks show it); symlinks and special files are refused; what runs is the file as it was when the call read it.",
	Annotations: &mcp.ToolAnnotations{Title: "Run a code file", OpenWorldHint: new(bool)},
}

// ExecuteCodeFileInput are execute_code_file's arguments.
type ExecuteCodeFileInput struct {
	FilePath  string  `json:"file_path" jsonschema:"the file to run, absolute under the code-storage directory or relative to it"`
	Input     string  `json:"input,omitempty" jsonschema:"text fed to the program's standard input; without it input() raises EOFError at once"`
	TimeoutS  float64 `json:"timeout_s,omitempty" jsonschema:"wall-clock limit in seconds; default and maximum are set by the server"`
	SessionID string  `json:"session_id,omitempty" jsonschema:"run the file's code in this stateful session, whose variables persist between calls"`
}

func (h *handlers) executeCodeFile(ctx context.Context, req *mcp.CallToolRequest, in ExecuteCodeFileInput) (*mcp.CallToolResult, ExecutionOutput, error) {
	return h.runFile(ctx, req, in, nil)
}

// runFile is execute_code_file with command-line arguments for the program.
func (h *handlers) runFile(ctx context.Context, req *mcp.CallToolRequest, in ExecuteCodeFileInput, args []string) (*mcp.CallToolResult, ExecutionOutput, error) {
	if err := h.checkRunArgs(in.TimeoutS, in.Input, in.SessionID); err != nil {
		return nil, ExecutionOutput{}, err
	}
	rel, err := h.resolve(ctx, in.FilePath)
	if err != nil {
		return nil, ExecutionOutput{}, err
	}
	// The file is read once, here, through the storage root (no symlink,
	// regular files only, checked on the opened file), and its bytes are
	// what the guardrails see and what runs: the container never opens the
	// path, so a program running beside cannot swap the file meanwhile.
	code, cut, err := h.cfg.Storage.Read(rel, int64(h.cfg.MaxFileBytes))
	if err != nil {
		return nil, ExecutionOutput{}, h.fileError(ctx, "read the file", in.FilePath, err)
	}
	if cut {
		return nil, ExecutionOutput{}, h.fileError(ctx, "read the file", in.FilePath, storage.ErrTooLarge)
	}
	if err := h.guard(string(code)); err != nil {
		return nil, ExecutionOutput{}, err
	}
	// In a session the file is not mounted: tracebacks show its path in code storage.
	r := runRequest{req: req, saved: &saved{file: rel, host: h.cfg.Storage.Abs(rel), shown: rel}, code: string(code),
		session: in.SessionID, input: in.Input, timeoutS: in.TimeoutS, args: args}
	return h.run(ctx, r)
}
