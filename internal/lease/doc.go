// Package lease tells whether a pybox process is certainly gone.
//
// Each process that creates containers holds a lease: an exclusive flock(2)
// on a file of its own, <id>.lock, in a folder it shares with the other
// pybox processes that use the same state directory. The kernel drops the
// lock when the process dies, whatever PID namespace or container it ran
// in, and the lock works across containers that mount the folder. So
// whoever takes a lease's lock (without waiting) knows its owner is gone;
// a hostname and a pid prove nothing of the kind across PID namespaces.
//
// Protocol: a lease file is only ever removed by someone who holds its lock
// (its owner at the end, or a reaper that took it), and whoever locks an
// open lease file then checks that the path still names that very file
// (else it locked one already removed: the owner creates it again, a reaper
// gives up). Hence holding the lock of the file the path names means its
// owner no longer does.
//
// Lifecycle: Open a Dir (created 0700 when missing); Acquire a Lease for a
// new owner id (NewID) and keep it for the process's life; TryTake a gone
// owner's lease to clean up after it; Remove a Lease (file and lock) when
// nothing of its owner is left, or Release it (lock only) to leave the
// clean-up to a later reaper. A Dir is safe for concurrent use; a Lease is
// not.
package lease
