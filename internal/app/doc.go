// Package app is what one owner's pybox is made of, and its lifecycle:
// the settings (Config, filled by cmd/pybox from flags, environment and
// policy), the engine or cluster backend, the sandbox, the environment
// manager and installer, the owner's storage (metered, or a quota
// filesystem), egress, code mode's downstream servers and the notices the
// model is told once. New wires them, Start makes the environment ready,
// MCPServer serves them as MCP tools, NewTenant makes a tenant's own over
// the same engine, and Close undoes it all.
//
// It knows no flags and serves no transport: cmd/pybox parses, and the
// serving layers (stdio, HTTP) and batch tools (eval, bench) use an App.
// An App is safe for concurrent use once New returned; its exported
// fields are read-only.
package app
