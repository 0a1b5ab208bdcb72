package tools

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/pybox-dev/pybox/internal/storage"
	"github.com/pybox-dev/pybox/sandbox"
)

// ExecutionOutput is the structured result of every run.
type ExecutionOutput struct {
	ExitCode  int    `json:"exit_code" jsonschema:"the program's exit status (137 when killed)"`
	Stdout    string `json:"stdout" jsonschema:"captured standard output (capped)"`
	Stderr    string `json:"stderr" jsonschema:"captured standard error (capped)"`
	TimedOut  bool   `json:"timed_out" jsonschema:"the program hit its time limit and was killed"`
	OOMKilled bool   `json:"oom_killed" jsonschema:"the program exceeded its memory limit and was killed"`
	Truncated bool   `json:"truncated" jsonschema:"stdout or stderr exceeded the output cap and was cut"`
	// QuotaExceeded: the program took its workspace past the storage
	// quota (or the host disk down to its reserve) and was stopped.
	QuotaExceeded bool `json:"quota_exceeded,omitempty" jsonschema:"the program filled its workspace past the storage quota and was stopped"`
	// ResourceKilled: the runtime killed the whole sandbox (gVisor does
	// past the process limit).
	ResourceKilled bool   `json:"resource_killed,omitempty" jsonschema:"the sandbox was killed for exceeding its resource limits (too many processes); later output is lost"`
	DurationMS     int64  `json:"duration_ms" jsonschema:"wall-clock run time in milliseconds"`
	FilePath       string `json:"file_path" jsonschema:"host path of the program file in code storage"`
	SessionID      string `json:"session_id,omitempty" jsonschema:"the session the program ran in"`
	NewSession     bool   `json:"new_session,omitempty" jsonschema:"this call started the session (no earlier variables)"`
	// SessionLost is set when the session's container died or was killed
	// (timeout, out of memory, the process exited): its variables are gone
	// and the next call with the same session_id starts a new session.
	SessionLost bool `json:"session_lost,omitempty" jsonschema:"the session's state was lost; the next call starts a new session"`
	// Artifacts are the files in the run's own output folder
	// ($PYBOX_OUTPUTS, outputs/<run>/), saved figures included.
	Artifacts []Artifact `json:"artifacts,omitempty" jsonschema:"files the program saved in its own output folder, outputs/<run>/ ($PYBOX_OUTPUTS), figures included"`
	// NotSaved are files of that folder that were not copied into the
	// workspace (its storage quota or the host's disk reserve would have
	// been passed, or the file could not be read); they are gone.
	NotSaved []Artifact `json:"not_saved,omitempty" jsonschema:"files of the run's output folder that were not saved in the workspace (storage quota, disk reserve); they are gone"`
	Figures  int        `json:"figures,omitempty" jsonschema:"matplotlib figures returned as PNG images"`
	// A program the policy's guardrails refused (nothing ran): error_code
	// POLICY_VIOLATION, with the rule, what broke it and the line.
	ErrorCode string `json:"error_code,omitempty" jsonschema:"POLICY_VIOLATION when the policy's guardrails refused the program (nothing ran)"`
	Rule      string `json:"rule,omitempty" jsonschema:"the guardrail the program broke (import_not_allowed, import_denied, name_denied, attribute_denied, max_chars, max_lines, too_complex)"`
	Detail    string `json:"detail,omitempty" jsonschema:"the module, name or attribute (or the size) that broke it"`
	Line      int    `json:"line,omitempty" jsonschema:"the line it is on (0: the program as a whole)"`
	// MCPCalls counts the downstream MCP tool calls the program made.
	MCPCalls int `json:"mcp_calls,omitempty" jsonschema:"downstream MCP tool calls the program made (code mode)"`
}

// policyViolation is the tool error for a program the guardrails refused.
func policyViolation(v *sandbox.Violation) (*mcp.CallToolResult, ExecutionOutput, error) {
	where := "the program as a whole"
	if v.Line > 0 {
		where = fmt.Sprintf("line %d", v.Line)
	}
	msg := fmt.Sprintf("POLICY_VIOLATION: rule %s: %s (%s). Nothing ran: the policy's guardrails refuse this program; change the code (or the policy).",
		v.Rule, v.Detail, where)
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}},
		ExecutionOutput{ErrorCode: "POLICY_VIOLATION", Rule: v.Rule, Detail: v.Detail, Line: v.Line, ExitCode: -1}, nil
}

// runRequest is one program to run.
type runRequest struct {
	req      *mcp.CallToolRequest // for progress notifications; may be nil
	saved    *saved               // where the program's file is
	code     string               // the program text (sessions send it to the kernel)
	session  string               // "" = a fresh, ephemeral container
	follow   bool                 // the session restarts when the environment changed
	shared   bool                 // the session works in code storage itself (mcp-executor), not a private folder
	input    string
	args     []string          // the program's sys.argv[1:]
	vars     map[string]any    // bound as globals before the program runs
	tools    sandbox.ToolCalls // code mode: the downstream tools the program may call
	timeoutS float64
}

// run executes a stored program and shapes the MCP result.
func (h *handlers) run(ctx context.Context, r runRequest) (*mcp.CallToolResult, ExecutionOutput, error) {
	timeout, err := h.timeout(r.timeoutS) // checked by checkRunArgs already
	if err != nil {
		return nil, ExecutionOutput{}, err
	}
	if err := h.cfg.Ready(ctx); err != nil {
		return nil, ExecutionOutput{}, h.readyError(ctx, err)
	}
	count := func() int { return 0 }
	if h.cfg.CodeMode != nil {
		r.tools, count = h.cfg.CodeMode.ForRun()
	}
	res, outs, err := h.execute(ctx, r, timeout)
	if h.cfg.Observe != nil {
		path := "cold"
		switch {
		case r.session != "":
			path = "session"
		case res.Warm:
			path = "warm"
		}
		h.cfg.Observe(path, res, err)
	}
	got := outs.collect()
	outs.close()
	note := got.note
	if r.saved.temporary {
		r.saved.temporary = false
		_ = h.cfg.Storage.Remove(r.saved.file) // best effort: a program may have removed or replaced it
	}
	if r.saved.note != "" {
		note += "(" + r.saved.note + ")\n"
	}
	if res.OutputsNote != "" {
		note += "(" + res.OutputsNote + ")\n"
	}
	if err != nil {
		return nil, ExecutionOutput{}, h.infraError(ctx, err)
	}
	if v := res.Violation; v != nil {
		return policyViolation(v)
	}
	out := ExecutionOutput{
		ExitCode: res.ExitCode, Stdout: res.Stdout, Stderr: res.Stderr, TimedOut: res.TimedOut,
		OOMKilled: res.OOMKilled, Truncated: res.Truncated, QuotaExceeded: res.QuotaExceeded, ResourceKilled: res.ResourceKilled, DurationMS: res.Duration.Milliseconds(),
		FilePath: r.saved.host, SessionID: r.session, NewSession: res.NewSession, SessionLost: res.SessionLost,
		Artifacts: got.arts, NotSaved: got.notSaved, Figures: len(got.figures), MCPCalls: count(),
	}
	content := append([]mcp.Content{&mcp.TextContent{Text: summary(res) + artifactText(outs, got.arts) + note}}, got.figures...)
	// A timeout or a quota stop is a tool error; the partial output stays visible.
	return &mcp.CallToolResult{Content: content, IsError: res.TimedOut || res.QuotaExceeded || res.ResourceKilled}, out, nil
}

// execute runs r in a fresh container, or in its session, and returns the
// result with the run's own output folder (nil when there is none).
func (h *handlers) execute(ctx context.Context, r runRequest, timeout time.Duration) (sandbox.Result, *outputs, error) {
	var stdin *string
	if r.input != "" {
		stdin = &r.input
	}
	var guard *sandbox.Guard
	if h.cfg.GuardRules != nil {
		guard = &sandbox.Guard{Rules: h.cfg.GuardRules, Code: r.code}
	}

	env := h.cfg.Envs.Active()
	prog := startProgress(ctx, r.req)
	defer prog.stop()
	if r.session == "" {
		p := sandbox.Program{Image: env.Ref(), Python: env.RunPython(), Workspace: h.cfg.Storage.Path(),
			File: r.saved.file, Stdin: stdin, Args: r.args, Timeout: timeout, OnOutput: prog.hook(), Prepare: r.saved.save, Guard: guard, Variables: r.vars, Tools: r.tools}
		if h.cfg.Scratch { // the program travels with the request; its workspace is its own
			p.Workspace, p.Source = "", &r.code
		} else { // what runs is the code checked, not what the path holds by then
			p.Text = &r.code
		}
		res, err := h.cfg.Sandbox.Run(ctx, p)
		return res, h.runOutputs(ctx, res.Outputs, h.cfg.Storage, nil), err
	}
	// The session's folder is made by its start (once admitted, after an
	// earlier session of the id ended) and opened once the call holds its
	// turn: nothing is made for a refused call.
	var ws *storage.Dir
	prepare := func() error {
		d, err := h.sessionWorkspace(r)
		if err != nil {
			return err
		}
		ws = d
		return runPrepare(r.saved.save)
	}
	p := sandbox.SessionProgram{Image: env.Ref(), Python: env.RunPython(), Workspace: h.cfg.Storage.Path(), Code: r.code,
		Filename: r.saved.shown, Stdin: stdin, Args: r.args, Timeout: timeout, OnOutput: prog.hook(), FollowImage: r.follow,
		Private: !r.shared, Prepare: prepare, Guard: guard, Variables: r.vars, Tools: r.tools}
	if !r.shared {
		if h.cfg.Sessions == nil {
			return sandbox.Result{}, nil, errors.New("sessions are not configured (no sessions folder)")
		}
		p.Workspace = filepath.Join(h.cfg.Sessions.Path(), r.session)
		p.MakeWorkspace = func() error { return closeDir(h.sessionDir(r.session)) }
	}
	res, err := h.cfg.Sandbox.RunInSession(ctx, r.session, p)
	if ws == nil { // nothing ran: there are no outputs
		return res, nil, err
	}
	// The call's own folder, copied into the session's workspace.
	return res, h.runOutputs(ctx, res.Outputs, ws, func() { ws.Close() }), err
}

func runPrepare(save func() error) error {
	if save == nil {
		return nil
	}
	return save()
}

// closeDir closes d, once made.
func closeDir(d *storage.Dir, err error) error {
	if err != nil {
		return err
	}
	return d.Close()
}

// artifactText lists the output files for the model, by host path.
func artifactText(o *outputs, arts []Artifact) string {
	if len(arts) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("--- output files ---\n")
	for _, a := range arts {
		fmt.Fprintf(&b, "%s (%d bytes)\n", o.shown.Abs(a.Path), a.Bytes)
	}
	return b.String()
}

// checkRunArgs refuses a bad timeout_s, oversized input or a bad
// session_id before anything is saved or run.
func (h *handlers) checkRunArgs(timeoutS float64, input, session string) error {
	if _, err := h.timeout(timeoutS); err != nil {
		return err
	}
	if len(input) > h.cfg.MaxInputBytes {
		return fmt.Errorf("input is %d bytes; the limit is %d bytes", len(input), h.cfg.MaxInputBytes)
	}
	if session != "" {
		return sandbox.ValidSessionID(session)
	}
	return nil
}

// timeout turns timeout_s into a duration, capped by the configured maximum.
func (h *handlers) timeout(seconds float64) (time.Duration, error) {
	if seconds == 0 {
		return 0, nil
	}
	if seconds < 0 || math.IsNaN(seconds) || math.IsInf(seconds, 0) {
		return 0, fmt.Errorf("timeout_s must be a positive number of seconds, got %v", seconds)
	}
	if seconds < 0.1 {
		return 0, fmt.Errorf("timeout_s must be at least 0.1 seconds, got %v", seconds)
	}
	// Capped before converting: a huge timeout_s would overflow a Duration.
	return time.Duration(min(seconds, h.cfg.MaxTimeout.Seconds()) * float64(time.Second)), nil
}

// summary is the text the model reads.
func summary(r sandbox.Result) string {
	var b strings.Builder
	if r.SessionNote != "" {
		fmt.Fprintf(&b, "Note: %s.\n", r.SessionNote)
	}
	switch {
	case r.TimedOut:
		fmt.Fprintf(&b, "Execution timed out after %s; the container was killed. Output so far:\n", r.Timeout)
	case r.QuotaExceeded:
		fmt.Fprintf(&b, "The program was stopped: %s. Output so far:\n", r.QuotaNote)
	case r.ResourceKilled:
		fmt.Fprintf(&b, "The sandbox was killed for exceeding its resource limits: too many processes or threads (exit status %d); output after that point is lost.\n", r.ExitCode)
	case r.OOMKilled:
		fmt.Fprintf(&b, "The program ran out of memory and was killed (exit status %d).\n", r.ExitCode)
	default:
		fmt.Fprintf(&b, "Exit status: %d\n", r.ExitCode)
	}
	section(&b, "stdout", r.Stdout)
	section(&b, "stderr", r.Stderr)
	switch {
	case r.DroppedBytes > 0:
		fmt.Fprintf(&b, "(output was truncated at the output cap: %d more bytes were dropped)\n", r.DroppedBytes)
	case r.Truncated:
		b.WriteString("(output was truncated at the output cap)\n")
	}
	if r.Network != "" {
		fmt.Fprintf(&b, "network: %s\n", r.Network)
	}
	if r.SessionLost {
		b.WriteString("The session's state was lost (its container was stopped); the next call with this session_id starts a new session.\n")
	}
	return b.String()
}

func section(b *strings.Builder, name, text string) {
	if text == "" {
		return
	}
	fmt.Fprintf(b, "--- %s ---\n%s", name, text)
	if !strings.HasSuffix(text, "\n") {
		b.WriteString("\n")
	}
}

// infraError turns a failure to run into a tool error the model can act on.
func (h *handlers) infraError(ctx context.Context, err error) error {
	switch {
	case errors.Is(err, sandbox.ErrBusy), errors.Is(err, sandbox.ErrSessionLimit), errors.Is(err, sandbox.ErrBadSessionID), errors.Is(err, sandbox.ErrNoSession),
		errors.Is(err, sandbox.ErrQuota), errors.Is(err, sandbox.ErrDaemonLost), errors.Is(err, sandbox.ErrNoVerdict), errors.Is(err, sandbox.ErrNoEgress):
		return err
	case errors.Is(err, errSave):
		return h.internal(ctx, "save code", err)
	case errors.Is(err, sandbox.ErrPermission):
		text := err.Error()
		return errors.New("Docker is not usable: " + text[max(strings.Index(text, "permission denied on "), 0):])
	case errors.Is(err, sandbox.ErrUnreachable):
		var ue *sandbox.UnreachableError
		if errors.As(err, &ue) {
			return errors.New(ue.Error()) // where pybox looked, and what to do
		}
		return errors.New("Docker is not reachable: start the Docker daemon (run `pybox doctor` for details)")
	case errors.Is(err, sandbox.ErrShutdown):
		return errors.New("the server is shutting down; the run was stopped and its container removed")
	case errors.Is(err, context.Canceled):
		return errors.New("the run was cancelled; its container was removed")
	}
	return h.internal(ctx, "run", err)
}

// readyError turns a failure to get the runtime ready (Docker down, the
// runtime image not built) into a tool error for any tool.
func (h *handlers) readyError(ctx context.Context, err error) error {
	switch {
	case errors.Is(err, sandbox.ErrBusy), errors.Is(err, sandbox.ErrUnreachable):
		return h.infraError(ctx, err)
	case errors.Is(err, context.Canceled):
		return errors.New("the call was cancelled")
	}
	return h.internal(ctx, "prepare the Python environment", err)
}

// internal logs err with a fresh id and returns a short error naming the id.
func (h *handlers) internal(ctx context.Context, what string, err error) error {
	id := newID()
	h.cfg.Log.ErrorContext(ctx, "tool failure", "error_id", id, "op", what, "err", err)
	return fmt.Errorf("pybox could not %s because of an internal failure (error id %s; details are in the server log)", what, id)
}

// newID is 8 random hex digits.
func newID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on Linux (documented)
	return hex.EncodeToString(b)
}

// sessionWorkspace opens r's session's workspace for the caller to close:
// its private folder, or code storage for a shared session.
func (h *handlers) sessionWorkspace(r runRequest) (*storage.Dir, error) {
	if r.shared {
		return h.cfg.Storage.Reopen()
	}
	return h.openSessionDir(r.session)
}
