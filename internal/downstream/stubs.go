package downstream

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Stubs renders tools as Python: one class per server whose static
// methods have the tools' parameters, typed from their JSON schemas
// (required first, the rest defaulting to None) and their descriptions as
// docstrings, each calling call_mcp_tool("SERVER.TOOL", ...), so a model
// writes a correct call the first time.
func Stubs(tools []Tool) string {
	var b strings.Builder
	b.WriteString("# Downstream MCP tools, callable from code: from pybox_tools import tools, call_mcp_tool\n")
	b.WriteString("from typing import Any\n")
	byServer := map[string][]Tool{}
	var servers []string
	for _, t := range tools {
		if _, ok := byServer[t.Server]; !ok {
			servers = append(servers, t.Server)
		}
		byServer[t.Server] = append(byServer[t.Server], t)
	}
	slices.Sort(servers)
	for _, server := range servers {
		fmt.Fprintf(&b, "\n\nclass %s:\n", server)
		ts := byServer[server]
		slices.SortFunc(ts, func(x, y Tool) int { return strings.Compare(x.Name, y.Name) })
		for _, t := range ts {
			writeStub(&b, t)
		}
	}
	return b.String()
}

var notIdent = regexp.MustCompile(`[^A-Za-z0-9_]`)

// pyName makes a Python identifier of s.
func pyName(s string) string {
	n := notIdent.ReplaceAllString(s, "_")
	if n == "" || (n[0] >= '0' && n[0] <= '9') {
		n = "_" + n
	}
	if pyKeywords[n] {
		n += "_"
	}
	return n
}

var pyKeywords = map[string]bool{"False": true, "None": true, "True": true, "and": true, "as": true, "assert": true, "async": true,
	"await": true, "break": true, "class": true, "continue": true, "def": true, "del": true, "elif": true, "else": true, "except": true,
	"finally": true, "for": true, "from": true, "global": true, "if": true, "import": true, "in": true, "is": true, "lambda": true,
	"nonlocal": true, "not": true, "or": true, "pass": true, "raise": true, "return": true, "try": true, "while": true, "with": true, "yield": true}

type param struct {
	name, py, typ, doc string
	required           bool
}

func writeStub(b *strings.Builder, t Tool) {
	props, _ := t.InputSchema["properties"].(map[string]any)
	required := map[string]bool{}
	if req, ok := t.InputSchema["required"].([]any); ok {
		for _, r := range req {
			if s, ok := r.(string); ok {
				required[s] = true
			}
		}
	}
	var params []param
	for name, raw := range props {
		p, _ := raw.(map[string]any)
		doc, _ := p["description"].(string)
		params = append(params, param{name: name, py: pyName(name), typ: pyType(p), doc: doc, required: required[name]})
	}
	slices.SortFunc(params, func(x, y param) int {
		if x.required != y.required {
			if x.required {
				return -1
			}
			return 1
		}
		return strings.Compare(x.name, y.name)
	})
	var sig, call []string
	for _, p := range params {
		if p.required {
			sig = append(sig, fmt.Sprintf("%s: %s", p.py, p.typ))
		} else {
			sig = append(sig, fmt.Sprintf("%s: %s | None = None", p.py, p.typ))
		}
		call = append(call, fmt.Sprintf("%q: %s", p.name, p.py))
	}
	fmt.Fprintf(b, "    @staticmethod\n    def %s(%s) -> Any:\n", pyName(t.Name), strings.Join(sig, ", "))
	doc := strings.TrimSpace(t.Description)
	if doc == "" {
		doc = t.Name
	}
	b.WriteString("        \"\"\"" + docText(doc, "        "))
	if len(params) > 0 {
		b.WriteString("\n\n        Args:\n")
		for _, p := range params {
			line := fmt.Sprintf("            %s (%s)", p.py, p.typ)
			if !p.required {
				line += ", optional"
			}
			if p.doc != "" {
				line += ": " + docText(p.doc, "                ")
			}
			b.WriteString(line + "\n")
		}
		b.WriteString("        \"\"\"\n")
	} else {
		b.WriteString("\"\"\"\n")
	}
	if len(params) == 0 {
		fmt.Fprintf(b, "        return call_mcp_tool(%q)\n\n", t.Qualified())
		return
	}
	fmt.Fprintf(b, "        args = {%s}\n", strings.Join(call, ", "))
	fmt.Fprintf(b, "        return call_mcp_tool(%q, **{k: v for k, v in args.items() if v is not None})\n\n", t.Qualified())
}

// docText keeps a description safe inside a triple-quoted docstring.
func docText(s, indent string) string {
	s = strings.ReplaceAll(s, `\`, `\\`)
	s = strings.ReplaceAll(s, `"""`, `\"\"\"`)
	return strings.ReplaceAll(s, "\n", "\n"+indent)
}

// pyType maps a JSON schema to a Python annotation.
func pyType(p map[string]any) string {
	t := p["type"]
	if list, ok := t.([]any); ok { // ["string", "null"]: the first that is not null
		t = nil
		for _, x := range list {
			if x != "null" {
				t = x
				break
			}
		}
	}
	switch t {
	case "string":
		return "str"
	case "integer":
		return "int"
	case "number":
		return "float"
	case "boolean":
		return "bool"
	case "array":
		if items, ok := p["items"].(map[string]any); ok {
			return "list[" + pyType(items) + "]"
		}
		return "list"
	case "object":
		return "dict"
	}
	return "Any"
}
