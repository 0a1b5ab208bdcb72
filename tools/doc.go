// Package tools is pybox's MCP surface: one file per tool, typed inputs and
// outputs, and the translation of sandbox results into MCP content. It is
// the only package that serves MCP.
//
// Three kinds of failure are kept apart. A user program that fails (an
// exception, a non-zero exit, OOM) is a normal result carrying its exit
// status. A failure the model should see and act on (timeout, size or
// policy violation, busy, Docker unreachable) is a tool error with a clear
// message. Infrastructure detail goes to the log with an id; the model sees
// the id. Protocol misuse is left to the SDK's JSON-RPC errors.
//
// The handlers hold no mutable state of their own; a Server built by
// NewServer is safe for concurrent calls.
package tools
