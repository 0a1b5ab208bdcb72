// Package storage is the code-storage directory: the host folder that holds
// the programs pybox runs and that the sandbox mounts at /workspace.
//
// Every path a caller passes is resolved inside the root with os.Root, so
// "../", absolute paths elsewhere and symlinks (which sandboxed code can
// plant, since it writes into the mounted folder) never reach outside it.
// FIFOs and devices are refused, reads are capped and writes are atomic
// (temp file + rename). A Dir is safe for concurrent use.
package storage
