package policies

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

//go:embed *.json
var builtin embed.FS

// ErrViolation: code was refused by a policy guardrail.
var ErrViolation = errors.New("POLICY_VIOLATION")

// Policy is a loaded, validated policy.
type Policy struct {
	Name        string
	Description string
	// Settings are defaults for pybox settings, keyed by environment variable.
	Settings map[string]string
	// Runtime is the OCI runtime the policy asks for, when no flag or
	// variable chose one: Prefer is used when the daemon has it (else
	// the default, with a warning); Require refuses to start without it.
	Runtime Runtime
	// Guard is the static guardrails checked inside the sandbox before a
	// program runs (nil: none).
	Guard *Guard
	// MCPTools are the downstream tools (SERVER.TOOL, path.Match patterns
	// such as "filesystem.*") code mode may call; nil (mcp_tools left out):
	// every configured one; empty (mcp_tools: []): none. A null mcp_tools
	// is refused at load.
	MCPTools []string
	deny     []rule
}

// Runtime is a policy's runtime choice.
type Runtime struct {
	Prefer  string `json:"prefer,omitempty"`
	Require string `json:"require,omitempty"`
}

type rule struct {
	re     *regexp.Regexp
	reason string
}

// file is a policy's JSON form.
type file struct {
	Name        string            `json:"name"`
	Description string            `json:"description"`
	Settings    map[string]string `json:"settings"`
	Runtime     Runtime           `json:"runtime"`
	Guard       *Guard            `json:"guard"`
	MCPTools    []string          `json:"mcp_tools"`
	Deny        []struct {
		Pattern string `json:"pattern"`
		Reason  string `json:"reason"`
	} `json:"deny"`
}

// Names lists the built-in policies.
func Names() []string { return []string{"default", "strict", "permissive"} }

// Load returns the built-in policy of that name, or reads the JSON file at
// that path when it contains a path separator or ends in .json. known lists
// the settings a policy may set; anything else is an error.
func Load(nameOrPath string, known []string) (*Policy, error) {
	data, err := read(nameOrPath)
	if err != nil {
		return nil, err
	}
	if ext := strings.ToLower(filepath.Ext(nameOrPath)); ext == ".yaml" || ext == ".yml" {
		// YAML is read as the JSON it stands for, so the same field checks apply.
		if data, err = yaml.YAMLToJSON(data); err != nil {
			return nil, fmt.Errorf("policy %s: not YAML: %w", nameOrPath, err)
		}
	}
	if err := checkAllowlists(data); err != nil {
		return nil, fmt.Errorf("policy %s: %w", nameOrPath, err)
	}
	var f file
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("policy %s: %w", nameOrPath, err)
	}
	return f.validate(nameOrPath, known)
}

func read(nameOrPath string) ([]byte, error) {
	if strings.ContainsRune(nameOrPath, os.PathSeparator) || slices.Contains([]string{".json", ".yaml", ".yml"}, filepath.Ext(nameOrPath)) {
		data, err := os.ReadFile(nameOrPath)
		if err != nil {
			return nil, fmt.Errorf("policy file: %w", err)
		}
		return data, nil
	}
	if !slices.Contains(Names(), nameOrPath) {
		return nil, fmt.Errorf("unknown policy %q: use %s, or a path to a policy JSON file", nameOrPath, strings.Join(Names(), ", "))
	}
	return builtin.ReadFile(nameOrPath + ".json")
}

func (f file) validate(src string, known []string) (*Policy, error) {
	if f.Name == "" {
		return nil, fmt.Errorf("policy %s: a name is required", src)
	}
	p := &Policy{Name: f.Name, Description: f.Description, Settings: map[string]string{}, Runtime: f.Runtime, Guard: f.Guard}
	var errs []error
	if err := f.Guard.validate(); err != nil {
		errs = append(errs, err)
	}
	for i, p := range f.MCPTools {
		if _, err := path.Match(p, ""); err != nil || p == "" {
			errs = append(errs, fmt.Errorf("mcp_tools[%d]: %q is not a pattern such as filesystem.* or fs.read_file", i, p))
		}
	}
	p.MCPTools = f.MCPTools
	if f.Runtime.Prefer != "" && f.Runtime.Require != "" {
		errs = append(errs, errors.New("runtime: give prefer or require, not both"))
	}
	if _, ok := f.Settings["PYBOX_RUNTIME"]; ok && (f.Runtime.Prefer != "" || f.Runtime.Require != "") {
		errs = append(errs, errors.New("runtime: give either runtime or the PYBOX_RUNTIME setting, not both"))
	}
	for k, v := range f.Settings {
		if !slices.Contains(known, k) {
			errs = append(errs, fmt.Errorf("unknown setting %s", k))
			continue
		}
		p.Settings[k] = v
	}
	for _, d := range f.Deny {
		re, err := regexp.Compile(d.Pattern)
		if err != nil || d.Reason == "" {
			errs = append(errs, fmt.Errorf("deny rule %q needs a valid pattern and a reason", d.Pattern))
			continue
		}
		p.deny = append(p.deny, rule{re: re, reason: d.Reason})
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("policy %s: %w", src, err)
	}
	return p, nil
}

// Check applies the guardrails to code; a match is an ErrViolation naming
// the rule's reason and the line.
func (p *Policy) Check(code string) error {
	if p == nil {
		return nil
	}
	for _, r := range p.deny {
		if loc := r.re.FindStringIndex(code); loc != nil {
			line := strings.Count(code[:loc[0]], "\n") + 1
			return fmt.Errorf("%w: %s (policy %q, line %d)", ErrViolation, r.reason, p.Name, line)
		}
	}
	return nil
}
