package policies

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEmptyAllowlists: an allowlist written but empty or null never
// allows everything: mcp_tools: [] allows no tool; a null mcp_tools (YAML
// "mcp_tools:" with no value) and an empty or null imports_allow are
// refused, naming the field; mcp_tools left out allows every tool.
func TestEmptyAllowlists(t *testing.T) {
	for _, tc := range []struct {
		name, file, content string
		refused             string // the field named in the error; "" = loads
		tools               []string
		allNil              bool
	}{
		{"yaml empty value", "p.yaml", "name: p\nmcp_tools:\n", "mcp_tools", nil, false},
		{"yaml null", "p.yaml", "name: p\nmcp_tools: null\n", "mcp_tools", nil, false},
		{"json null", "p.json", `{"name": "p", "mcp_tools": null}`, "mcp_tools", nil, false},
		{"json empty list", "p.json", `{"name": "p", "mcp_tools": []}`, "", []string{}, false},
		{"yaml empty list", "p.yaml", "name: p\nmcp_tools: []\n", "", []string{}, false},
		{"left out", "p.json", `{"name": "p"}`, "", nil, true},
		{"imports_allow empty", "p.yaml", "name: p\nguard:\n  imports_allow: []\n", "guard.imports_allow", nil, false},
		{"imports_allow null", "p.yaml", "name: p\nguard:\n  imports_allow:\n", "guard.imports_allow", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), tc.file)
			os.WriteFile(path, []byte(tc.content), 0o644)
			p, err := Load(path, known)
			if tc.refused != "" {
				if err == nil || !strings.Contains(err.Error(), tc.refused) {
					t.Fatalf("err = %v; want it refused, naming %s", err, tc.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.allNil != (p.MCPTools == nil) || !tc.allNil && len(p.MCPTools) != 0 {
				t.Errorf("MCPTools = %#v; want nil=%v and no patterns", p.MCPTools, tc.allNil)
			}
		})
	}
}
