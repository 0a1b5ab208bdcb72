package tools

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pybox-dev/pybox/internal/storage"
	"github.com/pybox-dev/pybox/sandbox"
)

var executeCodeTool = &mcp.Tool{
	Name: "execute_code",
	Description: "Run Python 3 code in a fresh, isolated container and return stdout, stderr and the exit status. " +
		"The code is saved in the code-storage directory (the container's working directory, /workspace) as " +
		"<filename>_<random>.py and run there. No network; non-root; memory, CPU, process and time limits, and a storage quota on the workspace. " +
		"Figures and files the program saves in its own output folder (path in $PYBOX_OUTPUTS) come back with the result and are saved in the workspace at outputs/<run>/, within its quota. " +
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
	// Variables are bound as globals before the program runs (the MCP Code
	// Mode server's argument): JSON values become Python values.
	Variables map[string]any `json:"variables,omitempty" jsonschema:"a JSON object whose members are bound as global variables (JSON values as Python values) before the program runs"`
}

func (h *handlers) executeCode(ctx context.Context, req *mcp.CallToolRequest, in ExecuteCodeInput) (*mcp.CallToolResult, ExecutionOutput, error) {
	return h.runCode(ctx, req, in, nil)
}

// runCode is execute_code with command-line arguments for the program.
func (h *handlers) runCode(ctx context.Context, req *mcp.CallToolRequest, in ExecuteCodeInput, args []string) (*mcp.CallToolResult, ExecutionOutput, error) {
	if err := h.checkCode(in.Code); err != nil {
		return nil, ExecutionOutput{}, err
	}
	if err := h.checkRunArgs(in.TimeoutS, in.Input, in.SessionID); err != nil {
		return nil, ExecutionOutput{}, err
	}
	if err := checkVariables(in.Variables); err != nil {
		return nil, ExecutionOutput{}, err
	}
	f, err := h.codeFile(in.Code, in.Filename, in.SessionID)
	if err != nil {
		return nil, ExecutionOutput{}, err
	}
	return h.run(ctx, runRequest{req: req, saved: f, code: in.Code, session: in.SessionID, input: in.Input, timeoutS: in.TimeoutS, args: args, vars: in.Variables})
}

var pythonName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// checkVariables refuses variable names Python could not bind as names.
func checkVariables(vars map[string]any) error {
	for name := range vars {
		if !pythonName.MatchString(name) || len(name) > 128 {
			return fmt.Errorf("variables: %.130q is not a Python variable name (letters, digits and _, not starting with a digit)", name)
		}
	}
	return nil
}

// codeFile plans where code is stored, as <filename>_<random>.py: in
// code storage for a stateless run, in the session's own folder for a
// session run. The file is written only by save, which the run calls once
// it holds a slot (so a refused or queued call leaves nothing).
func (h *handlers) codeFile(code, filename, session string) (*saved, error) {
	name := storage.NewCodeName(filename)
	if session == "" {
		f := &saved{file: name, host: h.cfg.Storage.Abs(name)}
		f.save = func() error { return f.store(h, h.cfg.Storage, name, code) }
		return f, nil
	}
	if err := sandbox.ValidSessionID(session); err != nil {
		return nil, err
	}
	if h.cfg.Sessions == nil {
		return nil, errors.New("sessions are not configured (no sessions folder)")
	}
	f := &saved{host: filepath.Join(h.cfg.Sessions.Path(), session, name), shown: sandbox.WorkspaceMount + "/" + name}
	f.save = func() error {
		ws, err := h.openSessionDir(session)
		if err != nil {
			return err
		}
		defer ws.Close()
		return f.store(h, ws, name, code)
	}
	return f, nil
}

// maxOverQuotaCode is the largest program file saved into a workspace
// over its storage quota (for the run that deletes files to make room);
// it is removed after the run.
const maxOverQuotaCode = 64 << 10

// store writes the program's file into dir, within its quota. A workspace
// over its quota still gets a small program (a session's kernel gets the
// code itself and needs no file at all), which does not stay: see note.
func (f *saved) store(h *handlers, dir *storage.Dir, name, code string) error {
	if err := h.room(dir.Path(), int64(len(code))); err != nil {
		if !errors.Is(err, sandbox.ErrQuota) || len(code) > maxOverQuotaCode {
			return err
		}
		if f.file == "" { // a session: the kernel gets the code itself
			f.note = "the program's file was not saved: the session's folder is over its storage quota"
			return nil
		}
		f.temporary = true
		f.note = "the program's file was removed after the run: the workspace is over its storage quota"
	}
	if err := dir.Create(name, []byte(code)); err != nil {
		if full := storageFull(err); full != nil {
			return fmt.Errorf("the program's file could not be saved: %w", full)
		}
		return fmt.Errorf("%w: %w", errSave, err)
	}
	return nil
}

// errSave marks a failure to store a program's file (an internal failure,
// unlike a refusal for the quota).
var errSave = errors.New("save the program's file")

// saved is where a program's file is.
type saved struct {
	file      string       // relative to code storage (stateless runs)
	host      string       // host path, reported as file_path
	shown     string       // sessions: the name tracebacks show
	save      func() error // writes the file (nil: it exists already)
	temporary bool         // save wrote it into a workspace over its quota: removed after the run
	note      string       // what save did not keep, if anything
}

// room fails when a file of size bytes would take the workspace dir past
// its storage quota (see sandbox.Room).
func (h *handlers) room(dir string, size int64) error {
	if h.cfg.Sandbox == nil { // unit tests of the file tools alone
		return nil
	}
	return h.cfg.Sandbox.Room(dir, size)
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
