package tools

import (
	"slices"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// addTool registers a tool whose input schema uses plain types: an
// optional list is {"type": "array"}, not {"type": ["null", "array"]} as
// inferred from a Go slice. Optional means "not required"; clients such as
// the MCP Inspector CLI parse a list argument only when its type is
// exactly "array".
func addTool[In, Out any](s *mcp.Server, t *mcp.Tool, h mcp.ToolHandlerFor[In, Out]) {
	addToolWith(s, t, h, nil)
}

// addToolWith is addTool with a last change to the inferred input schema.
func addToolWith[In, Out any](s *mcp.Server, t *mcp.Tool, h mcp.ToolHandlerFor[In, Out], change func(*jsonschema.Schema)) {
	tt := *t // the package-level tool is shared by every server
	if schema, err := jsonschema.For[In](nil); err == nil {
		plainTypes(schema)
		if change != nil {
			change(schema)
		}
		tt.InputSchema = schema
	}
	mcp.AddTool(s, &tt, h)
}

// plainTypes rewrites every ["null", T] type under s to T.
func plainTypes(s *jsonschema.Schema) {
	if s == nil {
		return
	}
	if len(s.Types) == 2 && slices.Contains(s.Types, "null") {
		s.Type = s.Types[0]
		if s.Type == "null" {
			s.Type = s.Types[1]
		}
		s.Types = nil
	}
	for _, p := range s.Properties {
		plainTypes(p)
	}
	plainTypes(s.Items)
}
