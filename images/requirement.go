package images

import "github.com/pybox-dev/pybox/internal/pep508"

// Requirement parsing lives in internal/pep508; these names are images'.
type (
	Requirement       = pep508.Requirement
	RequirementPolicy = pep508.Policy
)

// ErrBadRequirement is wrapped by every error ParseRequirement and
// ParseRequirements return: a package spec was refused before anything ran.
var ErrBadRequirement = pep508.ErrBad

// ParseRequirement parses one requirement (see pep508.Parse).
func ParseRequirement(spec string, p RequirementPolicy) (Requirement, error) {
	return pep508.Parse(spec, p)
}

// ParseRequirements parses a list of requirements (see pep508.ParseAll).
func ParseRequirements(specs []string, p RequirementPolicy) ([]Requirement, error) {
	return pep508.ParseAll(specs, p)
}

func normalizeName(name string) string { return pep508.NormalizeName(name) }
