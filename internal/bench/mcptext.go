package bench

import (
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Text joins a tool result's text content.
func Text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}
