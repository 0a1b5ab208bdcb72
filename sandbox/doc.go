// Package sandbox runs Python programs in locked-down, ephemeral Docker
// containers. It is the only package that decides how a container is
// configured and driven; it never sees an MCP type.
//
// Lifecycle: New validates a Config and fills its defaults. Each Run takes a
// slot (bounded concurrency with a queue wait, ErrBusy past it), creates a
// container whose configuration is the pure function ContainerConfig of the
// Limits, feeds stdin, captures stdout/stderr through byte caps, enforces the
// wall-clock deadline (kill on expiry) and always removes the container on a
// detached, time-limited context. Every container carries the labels
// pybox.managed=true and its owner's identity, so ReapOrphans can remove
// what a dead server left behind.
//
// A *Sandbox is safe for concurrent use.
package sandbox
