package policies

import (
	"errors"
	"fmt"
	"regexp"
)

// Guard is a policy's static guardrails. They are checked on a real parse
// of the program (Python's ast), inside the program's own sandbox by the
// runner's supervisor before the program is handed over, never on the
// host: imports (import x, from x import y, __import__("x"),
// importlib.import_module("x"), with constant arguments), denied names and
// attributes (also reached as getattr(o, "name") or o["name"] with a
// constant), and size. A violation is reported, and nothing runs. The
// container (and gVisor) is the boundary; guardrails are policy.
type Guard struct {
	MaxChars   int      `json:"max_chars,omitempty"`       // characters of a program; 0 = no limit here
	MaxLines   int      `json:"max_lines,omitempty"`       // lines of a program; 0 = no limit here
	Allow      []string `json:"imports_allow,omitempty"`   // when set, only these modules (and their submodules) may be imported
	Deny       []string `json:"imports_deny,omitempty"`    // modules (and their submodules) never imported
	Names      []string `json:"names_deny,omitempty"`      // names never used (exec, eval, ...)
	Attributes []string `json:"attributes_deny,omitempty"` // attributes never used (fork, system, ...)
}

var (
	moduleName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$`)
	identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// validate names the field of each mistake.
func (g *Guard) validate() error {
	if g == nil {
		return nil
	}
	var errs []error
	if g.MaxChars < 0 {
		errs = append(errs, fmt.Errorf("guard.max_chars: %d is negative", g.MaxChars))
	}
	if g.MaxLines < 0 {
		errs = append(errs, fmt.Errorf("guard.max_lines: %d is negative", g.MaxLines))
	}
	for _, f := range []struct {
		field string
		list  []string
		re    *regexp.Regexp
		what  string
	}{
		{"guard.imports_allow", g.Allow, moduleName, "a module name such as json or os.path"},
		{"guard.imports_deny", g.Deny, moduleName, "a module name such as json or os.path"},
		{"guard.names_deny", g.Names, identifier, "a Python identifier"},
		{"guard.attributes_deny", g.Attributes, identifier, "a Python identifier"},
	} {
		for i, v := range f.list {
			if !f.re.MatchString(v) {
				errs = append(errs, fmt.Errorf("%s[%d]: %q is not %s", f.field, i, v, f.what))
			}
		}
	}
	return errors.Join(errs...)
}

// GuardRules is p's guardrails for the runner (nil when it has none).
func (p *Policy) GuardRules() any {
	if p == nil || p.Guard == nil {
		return nil
	}
	return p.Guard
}

// Violation is a program the guardrails refused.
type Violation struct {
	Rule   string `json:"rule"`   // max_chars, max_lines, import_denied, import_not_allowed, name_denied, attribute_denied, too_complex
	Detail string `json:"detail"` // the module, name or attribute, or the size
	Line   int    `json:"line"`   // 1-based; 0 for the program as a whole
}
