package downstream

import (
	"os"
	"strings"
)

// serverEnv is a command server's environment: the few variables a
// program needs to start (inherited, as the MCP SDKs' stdio clients do)
// plus its own configured env, never the rest of pybox's environment
// (keys, PYBOX_* settings, the code storage folder: a second pybox listed
// as a downstream must not share this one's storage or servers).
// Then come extra (Options.Env: what pybox tells every server it starts),
// then the server's own env.
func serverEnv(extra, own map[string]string) []string {
	var env []string
	for _, k := range inheritedEnv {
		// A value starting with "()" is a shell function: skipped, as the
		// SDKs do.
		if v, ok := os.LookupEnv(k); ok && !strings.HasPrefix(v, "()") {
			env = append(env, k+"="+v)
		}
	}
	for _, vars := range []map[string]string{extra, own} {
		for k, v := range vars {
			env = append(env, k+"="+v)
		}
	}
	return env
}
