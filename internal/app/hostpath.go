package app

import (
	"os"
	"path/filepath"
	"strings"
)

// hostPath is a folder setting as the host spells it, made absolute: a
// leading ~ (or ~/, ~\) is the user's home, as a shell would expand it; an
// MCP client's config (Claude Desktop's "env") passes it unexpanded. On
// Windows, C:\Users\me\code and C:/Users/me/code are the same folder, and
// both become C:\Users\me\code, the form Docker Desktop mounts.
func hostPath(p string) string {
	if p == "" {
		return p
	}
	if p == "~" || strings.HasPrefix(p, "~/") || strings.HasPrefix(p, `~\`) {
		if home, err := os.UserHomeDir(); err == nil {
			p = filepath.Join(home, p[1:])
		}
	}
	if abs, err := filepath.Abs(filepath.FromSlash(p)); err == nil {
		return abs
	}
	return p
}
