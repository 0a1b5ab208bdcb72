package main

import "github.com/pybox-dev/pybox/sandbox/eval"

// The eval end-to-end tests read `pybox eval`'s results with the
// package's own types.
type evalResult = eval.Result

const (
	evalExit         = eval.ErrorExit
	evalTimeout      = eval.ErrorTimeout
	evalOOM          = eval.ErrorOOM
	evalPolicy       = eval.ErrorPolicy
	evalRequirements = eval.ErrorRequirements
)
