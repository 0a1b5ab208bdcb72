package main

import (
	"fmt"

	"github.com/pybox-dev/pybox/sandbox"
)

// guard is c's policy for one program, the same for every entry point
// (serve's tools get the same two parts through tools.Config; `pybox run`
// and `pybox eval` call this): the policy's deny rules are checked here,
// and a match is an error (nothing runs); its guardrails travel with the
// program, for the runner to check on a real parse before the program
// runs (a refusal is Result.Violation).
func (c *config) guard(code string) (*sandbox.Guard, error) {
	if err := c.policy.Check(code); err != nil {
		return nil, err
	}
	if rules := c.policy.GuardRules(); rules != nil {
		return &sandbox.Guard{Rules: rules, Code: code}, nil
	}
	return nil, nil
}

// violationText says why the guardrails refused a program.
func violationText(v *sandbox.Violation) string {
	where := "the program as a whole"
	if v.Line > 0 {
		where = fmt.Sprintf("line %d", v.Line)
	}
	return fmt.Sprintf("POLICY_VIOLATION: rule %s: %s (%s); nothing ran: the policy's guardrails refuse this program", v.Rule, v.Detail, where)
}
