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
// pybox.managed=true and its owner's identity.
//
// With Config.LeaseDir, New takes a lease for the Sandbox's life (an
// exclusive flock on <LeaseDir>/<owner id>.lock, see internal/lease) and
// every container is also labelled pybox.lease=<that file's path>.
// ReapOrphans removes only the containers of owners whose lease file is in
// the same folder and no longer locked: owners that are certainly gone,
// whatever PID namespace or container they ran in. Close removes the
// sessions' and the pool's containers, then the lease file (or, when some
// container of this instance is left, only unlocks it for the next reaper).
//
// A *Sandbox is safe for concurrent use.
package sandbox
