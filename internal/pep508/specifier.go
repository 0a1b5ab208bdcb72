package pep508

import (
	"cmp"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// specifierOps lists the version operators, longest first so that prefix
// matching picks "===" over "==" and "<=" over "<". The order of
// opRank is the order clauses are rendered in: lower bounds before upper.
var specifierOps = []string{"===", "~=", "==", "!=", "<=", ">=", "<", ">"}

var opRank = map[string]int{"===": 0, "==": 1, "~=": 2, ">=": 3, ">": 4, "<=": 5, "<": 6, "!=": 7}

var (
	// versionRE is PEP 440 without epochs ('!' is refused as a shell
	// metacharacter) and without a leading "v".
	versionRE = regexp.MustCompile(`(?i)^[0-9]+(\.[0-9]+)*` +
		`([-_.]?(a|b|c|rc|alpha|beta|pre|preview)[-_.]?[0-9]*)?` +
		`(-[0-9]+|[-_.]?(post|rev|r)[-_.]?[0-9]*)?` +
		`([-_.]?dev[-_.]?[0-9]*)?` +
		`(\+[a-z0-9]+([-_.][a-z0-9]+)*)?$`)
	releaseRE    = regexp.MustCompile(`^[0-9]+(\.[0-9]+)*$`)
	compatibleRE = regexp.MustCompile(`^[0-9]+\.[0-9]+`) // ~= needs two release segments
	arbitraryRE  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._+-]*$`)
)

// parseSpecifier parses a possibly empty, possibly parenthesized list of
// version clauses and renders it without spaces, deduplicated and sorted.
func parseSpecifier(s string) (string, error) {
	if s == "" {
		return "", nil
	}
	if inner, ok := strings.CutPrefix(s, "("); ok {
		inner, ok = strings.CutSuffix(inner, ")")
		if !ok {
			return "", errors.New("unclosed ( in version specifier")
		}
		if s = strings.TrimSpace(inner); s == "" {
			return "", errors.New("empty version specifier in parentheses")
		}
	}
	var clauses []string
	for c := range strings.SplitSeq(s, ",") {
		clause, err := parseClause(strings.TrimSpace(c))
		if err != nil {
			return "", err
		}
		clauses = append(clauses, clause)
	}
	slices.SortFunc(clauses, compareClauses)
	return strings.Join(slices.Compact(clauses), ","), nil
}

func compareClauses(a, b string) int {
	opA, opB := clauseOp(a), clauseOp(b)
	return cmp.Or(cmp.Compare(opRank[opA], opRank[opB]), strings.Compare(a[len(opA):], b[len(opB):]))
}

func clauseOp(c string) string {
	for _, op := range specifierOps {
		if strings.HasPrefix(c, op) {
			return op
		}
	}
	return ""
}

// parseClause parses one "op version" clause and renders it without spaces.
func parseClause(c string) (string, error) {
	if c == "" {
		return "", errors.New("empty version clause (stray comma?)")
	}
	op := clauseOp(c)
	if op == "" {
		return "", fmt.Errorf(`expected a version specifier such as ">=1.0" after the name, got %q`, c)
	}
	v := strings.TrimSpace(c[len(op):])
	if v == "" {
		return "", fmt.Errorf("missing version after %s", op)
	}
	if err := checkVersion(op, v); err != nil {
		return "", err
	}
	return op + v, nil
}

// checkVersion applies the PEP 440 rules for which versions go with op.
func checkVersion(op, v string) error {
	eq := op == "==" || op == "!="
	switch prefix, wild := strings.CutSuffix(v, ".*"); {
	case op == "===":
		if !arbitraryRE.MatchString(v) {
			return fmt.Errorf("invalid version %q", v)
		}
	case wild:
		if !eq {
			return fmt.Errorf("wildcard .* is only allowed with == and !=, not %s", op)
		}
		if !releaseRE.MatchString(prefix) {
			return fmt.Errorf("invalid version %q", v)
		}
	case !versionRE.MatchString(v):
		return fmt.Errorf("invalid version %q", v)
	case strings.Contains(v, "+") && !eq:
		return fmt.Errorf("local version label is only allowed with == and !=, not %s", op)
	case op == "~=" && !compatibleRE.MatchString(v):
		return errors.New(`~= needs at least two release segments, e.g. "~=1.4"`)
	}
	return nil
}
