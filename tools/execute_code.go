package tools

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pybox-dev/pybox/internal/storage"
	"github.com/pybox-dev/pybox/sandbox"
)

var executeCodeTool = &mcp.Tool{
	Name: "execute_code",
	Description: "Run Python 3 code in a fresh, isolated container and return stdout, stderr and the exit status. " +
		"The code is saved in the code-storage directory (the container's working directory, /workspace) as " +
		"<filename>_<random>.py and run there. No network; non-root; memory, CPU, process and time limits. " +
		"Figures and files the program saves in its own output folder (path in $PYBOX_OUTPUTS, outputs/<run>/) come back with the result. " +
		"With session_id the program runs in a long-lived session whose variables persist across calls (each session has its own private folder as /workspace). " +
		"A failing program is a normal result with its exit code; a timeout kills the container and is reported as an error.",
	Annotations: &mcp.ToolAnnotations{Title: "Run Python code", OpenWorldHint: new(bool)},
}

// ExecuteCodeInput are execute_code's arguments (names as mcp_code_executor).
type ExecuteCodeInput struct {
	Code      string  `json:"code" jsonschema:"Python source code to run"`
	Filename  string  `json:"filename,omitempty" jsonschema:"base name for the saved file (a random suffix and .py are added)"`
	Input     string  `json:"input,omitempty" jsonschema:"text fed to the program's standard input; without it input() raises EOFError at once"`
	TimeoutS  float64 `json:"timeout_s,omitempty" jsonschema:"wall-clock limit in seconds; default and maximum are set by the server"`
	SessionID string  `json:"session_id,omitempty" jsonschema:"run in this stateful session (1-64 letters, digits, _ or -): variables persist between calls with the same id; without it every run is fresh"`
}

func (h *handlers) executeCode(ctx context.Context, req *mcp.CallToolRequest, in ExecuteCodeInput) (*mcp.CallToolResult, ExecutionOutput, error) {
	if err := h.checkCode(in.Code); err != nil {
		return nil, ExecutionOutput{}, err
	}
	if err := h.checkRunArgs(in.TimeoutS, in.Input, in.SessionID); err != nil {
		return nil, ExecutionOutput{}, err
	}
	f, err := h.saveCode(in.Code, in.Filename, in.SessionID)
	if err != nil {
		return nil, ExecutionOutput{}, h.internal(ctx, "save code", err)
	}
	return h.run(ctx, runRequest{req: req, saved: f, code: in.Code, session: in.SessionID, input: in.Input, timeoutS: in.TimeoutS})
}

// saveCode stores code as <filename>_<random>.py, in the session's own
// folder for a session run, and returns where: for a stateless run, the
// path relative to code storage (run and shown) and the host path; for a
// session, the host path and the name its tracebacks show.
func (h *handlers) saveCode(code, filename, session string) (saved, error) {
	name := storage.NewCodeName(filename)
	if session == "" {
		return saved{file: name, host: h.cfg.Storage.Abs(name)}, h.cfg.Storage.Create(name, []byte(code))
	}
	ws, err := h.sessionDir(session)
	if err != nil {
		return saved{}, err
	}
	defer ws.Close()
	if err := ws.Create(name, []byte(code)); err != nil {
		return saved{}, err
	}
	return saved{host: ws.Abs(name), shown: sandbox.WorkspaceMount + "/" + name}, nil
}

// saved is where a program's file is.
type saved struct {
	file  string // relative to code storage (stateless runs)
	host  string // host path, reported as file_path
	shown string // sessions: the name tracebacks show
}

// checkCode enforces the size cap and the policy's guardrails on code.
func (h *handlers) checkCode(code string) error {
	if len(code) > h.cfg.MaxCodeBytes {
		return fmt.Errorf("code is %d bytes; the limit is %d bytes", len(code), h.cfg.MaxCodeBytes)
	}
	return h.guard(code)
}

// guard applies the policy's guardrails, if any.
func (h *handlers) guard(code string) error {
	if h.cfg.Guard == nil {
		return nil
	}
	return h.cfg.Guard(code)
}
