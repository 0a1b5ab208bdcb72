package tools

import (
	"context"
	"errors"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pybox-dev/pybox/internal/storage"
	"github.com/pybox-dev/pybox/sandbox"
)

// The execute_python tools of two popular executors, backed by the same
// sandbox: mcp-executor's is stateful, mcp-python-executor's takes
// inputData (stdin lines).

var executePythonStatefulTool = &mcp.Tool{
	Name: "execute_python",
	Description: "Execute Python code in a persistent, isolated sandbox session: variables, imports and functions " +
		"defined in one call are available in the next. Its working directory is the workspace of read_file, " +
		"write_file and list_files. Returns stdout, stderr and the exit status. No network. " +
		"After install_package the session restarts on the updated environment (the result says so).",
	Annotations: &mcp.ToolAnnotations{Title: "Execute Python (stateful)", OpenWorldHint: new(bool)},
}

// ExecutePythonStatefulInput is mcp-executor's execute_python.
type ExecutePythonStatefulInput struct {
	Code string `json:"code" jsonschema:"Python code to execute"`
}

// defaultSession is the session mcp-executor's execute_python uses per MCP
// connection (stdio has one connection, so one session).
func defaultSession(req *mcp.CallToolRequest) string {
	id := "default"
	if req != nil && req.Session != nil && req.Session.ID() != "" {
		id = req.Session.ID()
	}
	safe := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, id)
	return "mcp-executor-" + safe[:min(len(safe), 40)]
}

// Unlike execute_code's sessions, this one follows the environment: after
// install_package it restarts on the new image (saying so), because
// installing and then importing is that tool set's everyday flow.
func (h *handlers) executePythonStateful(ctx context.Context, req *mcp.CallToolRequest, in ExecutePythonStatefulInput) (*mcp.CallToolResult, ExecutionOutput, error) {
	if err := h.checkCode(in.Code); err != nil {
		return nil, ExecutionOutput{}, err
	}
	session := defaultSession(req)
	// As in mcp-executor, the session works in code storage: what
	// write_file puts there, the program reads, and what it writes,
	// read_file finds.
	name := storage.NewCodeName("")
	f := &saved{host: h.cfg.Storage.Abs(name), shown: sandbox.WorkspaceMount + "/" + name}
	f.save = func() error { return f.store(h, h.cfg.Storage, name, in.Code) }
	return h.run(ctx, runRequest{req: req, saved: f, code: in.Code, session: session, follow: true, shared: true})
}

var executePythonTool = &mcp.Tool{
	Name: "execute_python",
	Description: "Execute Python code, or a script file from the workspace (scriptPath), in a fresh, isolated container " +
		"and return stdout, stderr and the exit status. inputData strings reach the program both as lines on standard input " +
		"(input() reads them in order) and as command-line arguments (sys.argv[1:]). No network.",
	Annotations: &mcp.ToolAnnotations{Title: "Execute Python", OpenWorldHint: new(bool)},
}

// ExecutePythonInput is mcp-python-executor's execute_python.
type ExecutePythonInput struct {
	Code       string   `json:"code,omitempty" jsonschema:"Python code to execute (or give scriptPath)"`
	ScriptPath string   `json:"scriptPath,omitempty" jsonschema:"a Python file in the workspace to run instead of code: relative to it, absolute under it, or /workspace/..."`
	InputData  []string `json:"inputData,omitempty" jsonschema:"strings given to the program as lines on standard input and as command-line arguments (sys.argv[1:])"`
}

func (h *handlers) executePython(ctx context.Context, req *mcp.CallToolRequest, in ExecutePythonInput) (*mcp.CallToolResult, ExecutionOutput, error) {
	input := ""
	if len(in.InputData) > 0 {
		input = strings.Join(in.InputData, "\n") + "\n"
	}
	switch {
	case in.Code != "" && in.ScriptPath != "":
		return nil, ExecutionOutput{}, errors.New("give code or scriptPath, not both")
	case in.ScriptPath != "":
		return h.runFile(ctx, req, ExecuteCodeFileInput{FilePath: in.ScriptPath, Input: input}, in.InputData)
	case in.Code == "":
		return nil, ExecutionOutput{}, errors.New("give code to run, or scriptPath: a Python file in the workspace")
	}
	return h.runCode(ctx, req, ExecuteCodeInput{Code: in.Code, Input: input}, in.InputData)
}
