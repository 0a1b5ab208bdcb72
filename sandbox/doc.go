// Package sandbox runs Python programs in locked-down, ephemeral Docker
// containers. It is the only package that decides how a container is
// configured and driven; it never sees an MCP type.
//
// Every container runs the in-image runner (images/runner) as its PID 1:
// a non-dumpable supervisor that alone holds the container's streams and
// forks a worker for the program. pybox talks to it in frames (protocol.go)
// tagged with per-request nonces the program never sees; one routine,
// conn.turn, drives a program in a cold container, a warm-pool container
// or a session's kernel: send the request, relay output through byte caps,
// end on the runner's verdict, the deadline (kill) or the caller's
// cancellation. Containers are configured by the pure function
// ContainerConfig; bind sources are checked (engine.Create) and each
// stateless run and session call gets a private output folder (Outputs;
// a session's come from its output area, sessionoutputs.go). What the
// caller copies back into a workspace is counted with a Charge. As root,
// each container runs as a uid of its own in the sandbox user's group
// (uid.go; Config.SharedUID), so the kernel's per-uid budgets (inotify
// instances, pipe buffers) are per sandbox.
//
// Lifecycle: New validates a Config, fills its defaults and takes the
// owner's lease. Run takes a slot (bounded concurrency with a queue wait,
// ErrBusy past it) and a ready container from the warm pool (pool.go) or
// a new one, and returns on the runner's verdict; the container is removed
// in the background. RunInSession drives long-lived kernels (sessions.go).
// Shutdown stops every call in flight; Close also waits for them, ends the
// sessions and the pool and releases the lease. Every container carries
// pybox.managed=true and its owner's lease, so ReapOrphans can remove what
// a dead server left behind.
//
// A *Sandbox is safe for concurrent use.
package sandbox
