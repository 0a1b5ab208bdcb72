// Package policies holds pybox's named policies and the logic that loads,
// validates and applies them. A policy is data: defaults for settings
// (limits, sessions, install rules) that an operator switches with one
// name, plus static guardrails that refuse code before it runs
// (ErrViolation, reported to the model as POLICY_VIOLATION).
//
// Precedence when a policy is in force: a command-line flag, then an
// environment variable, then the policy, then pybox's built-in default.
//
// Policies are immutable after Load; a *Policy is safe for concurrent use.
package policies
