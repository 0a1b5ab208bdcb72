// Package doctor is `pybox doctor`: it checks that one app can run
// programs safely (the engine and which one it is, its runtimes, the
// runtime image, code storage) and proves the isolation by running a
// probe in a real sandbox, under gVisor too when the daemon has it, and
// prints a line per check.
package doctor
