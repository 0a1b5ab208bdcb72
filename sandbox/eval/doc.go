// Package eval runs batches of Python programs, each with its tests, in
// fresh sandboxes and gives an exact verdict per program: the library
// behind `pybox eval`, which a Go harness can call directly.
//
// Run(ctx, samples, opts) runs samples Jobs at a time through a Backend
// (cmd/pybox wires one to its app: environments, installs, the policy's
// guard, a fresh sandbox per program) and sends one Outcome per sample,
// in input order, on the channel it returns. A verdict cannot be forged
// by the program: "passed" is the runner's supervisor's word that the
// program and its tests ended with status 0 after the tests ran to their
// end (an attestation the program cannot see; see images/runner), never
// something read from the program's output; a run that ended without a
// known verdict (sandbox.ErrNoVerdict) is an error, never a pass.
//
// ReadSamples reads and checks a JSON Lines batch before anything runs;
// Batch writes results in input order to a results file that a batch
// interrupted and run again resumes.
package eval
