package policies

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var known = []string{"PYBOX_TIMEOUT", "PYBOX_MAX_TIMEOUT", "PYBOX_MEMORY", "PYBOX_CPUS", "PYBOX_PIDS",
	"PYBOX_OUTPUT_LIMIT", "PYBOX_MAX_CONCURRENT", "PYBOX_MAX_SESSIONS", "PYBOX_SESSION_TTL",
	"PYBOX_MAX_CODE_SIZE", "PYBOX_MAX_FILE_SIZE", "PYBOX_ALLOW_URL_REQUIREMENTS", "PYBOX_ALLOW_SDIST"}

func TestBuiltinPoliciesLoad(t *testing.T) {
	for _, name := range Names() {
		p, err := Load(name, known)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if p.Name != name || p.Description == "" {
			t.Errorf("%s: name %q description %q", name, p.Name, p.Description)
		}
	}
	if p, _ := Load("default", known); len(p.Settings) != 0 {
		t.Errorf("the default policy must not change any setting: %v", p.Settings)
	}
}

func TestStrictGuardrails(t *testing.T) {
	p, err := Load("strict", known)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		code string
		deny string
	}{
		{"print(1)", ""},
		{"import os\nprint(os.getcwd())", ""},
		{"x = 1\nimport ctypes", "ctypes"},
		{"from ctypes import CDLL", "ctypes"},
		{"m = __import__('ctypes')", "ctypes"},
		{"import os\nos.fork()", "forking"},
		{"open('/proc/self/mem', 'rb')", "/proc"},
	}
	for _, tt := range tests {
		err := p.Check(tt.code)
		if tt.deny == "" && err != nil {
			t.Errorf("Check(%q) = %v, want allowed", tt.code, err)
		}
		if tt.deny != "" && (!errors.Is(err, ErrViolation) || !strings.Contains(err.Error(), tt.deny)) {
			t.Errorf("Check(%q) = %v, want a violation about %s", tt.code, err, tt.deny)
		}
	}
	if err := p.Check("a = 1\nb = 2\nimport ctypes"); !strings.Contains(err.Error(), "line 3") {
		t.Errorf("violation does not name the line: %v", err)
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	tests := []struct {
		name, src, want string
	}{
		{"unknown builtin", "lenient", "unknown policy"},
		{"missing file", filepath.Join(dir, "nope.json"), "policy file"},
		{"unknown setting", write("a.json", `{"name":"a","settings":{"PYBOX_EVERYTHING":"1"}}`), "unknown setting"},
		{"unknown field", write("b.json", `{"name":"b","extra":1}`), "unknown field"},
		{"bad pattern", write("c.json", `{"name":"c","deny":[{"pattern":"(","reason":"x"}]}`), "valid pattern"},
		{"no reason", write("d.json", `{"name":"d","deny":[{"pattern":"x"}]}`), "reason"},
		{"no name", write("e.json", `{"settings":{}}`), "name is required"},
	}
	for _, tt := range tests {
		if _, err := Load(tt.src, known); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want one mentioning %q", tt.name, err, tt.want)
		}
	}
	p, err := Load(write("ok.json", `{"name":"mine","settings":{"PYBOX_MEMORY":"1g"}}`), known)
	if err != nil || p.Settings["PYBOX_MEMORY"] != "1g" {
		t.Errorf("custom policy: %v %+v", err, p)
	}
}

// TestGuardValidation: a policy's guardrails are checked at load, each
// mistake naming its field.
func TestGuardValidation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "bad.json")
	os.WriteFile(path, []byte(`{"name": "bad", "guard": {"max_lines": -1, "imports_allow": ["json", "not a module"], "names_deny": ["ok", "1x"], "unknown_rule": true}}`), 0o644)
	if _, err := Load(path, nil); err == nil || !strings.Contains(err.Error(), "unknown_rule") {
		t.Errorf("an unknown guard field: %v", err)
	}
	os.WriteFile(path, []byte(`{"name": "bad", "guard": {"max_lines": -1, "imports_allow": ["json", "not a module"], "names_deny": ["ok", "1x"]}}`), 0o644)
	_, err := Load(path, nil)
	for _, want := range []string{"guard.max_lines", `guard.imports_allow[1]: "not a module"`, `guard.names_deny[1]: "1x"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not name %s", err, want)
		}
	}
	p, err := Load("strict", known)
	if err != nil || p.Guard == nil || p.Guard.MaxChars != 8000 || p.Guard.MaxLines != 400 || p.GuardRules() == nil {
		t.Errorf("strict's guardrails: %v %+v", err, p)
	}
	if d, err := Load("default", known); err != nil || d.GuardRules() != nil {
		t.Errorf("default has guardrails: %+v", d.Guard)
	}
}

// TestYAMLPolicy: a policy file may be YAML, checked field by field as
// its JSON form.
func TestYAMLPolicy(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "team.yaml")
	os.WriteFile(path, []byte("name: team\nsettings:\n  PYBOX_MEMORY: 1g\nguard:\n  max_lines: 50\n  imports_deny: [subprocess]\nmcp_tools: ['filesystem.*']\n"), 0o644)
	p, err := Load(path, known)
	if err != nil || p.Settings["PYBOX_MEMORY"] != "1g" || p.Guard.MaxLines != 50 || p.Guard.Deny[0] != "subprocess" || p.MCPTools[0] != "filesystem.*" {
		t.Fatalf("a YAML policy: %v %+v", err, p)
	}
	os.WriteFile(path, []byte("name: team\nguard:\n  max_line: 50\n"), 0o644)
	if _, err := Load(path, known); err == nil || !strings.Contains(err.Error(), "max_line") {
		t.Errorf("a YAML policy with a misspelt field: %v", err)
	}
	os.WriteFile(path, []byte("name: [unclosed\n"), 0o644)
	if _, err := Load(path, known); err == nil || !strings.Contains(err.Error(), "not YAML") {
		t.Errorf("broken YAML: %v", err)
	}
}
