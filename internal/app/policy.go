package app

import (
	"github.com/pybox-dev/pybox/sandbox"
)

// Guard is c's policy for one program, the same for every entry point
// (serve's tools get the same two parts through tools.Config; `pybox run`
// and `pybox eval` call this): the policy's deny rules are checked here,
// and a match is an error (nothing runs); its guardrails travel with the
// program, for the runner to check on a real parse before the program
// runs (a refusal is Result.Violation).
func (c *Config) Guard(code string) (*sandbox.Guard, error) {
	if err := c.LoadedPolicy.Check(code); err != nil {
		return nil, err
	}
	if rules := c.LoadedPolicy.GuardRules(); rules != nil {
		return &sandbox.Guard{Rules: rules, Code: code}, nil
	}
	return nil, nil
}
