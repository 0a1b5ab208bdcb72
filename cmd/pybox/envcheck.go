package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/pybox-dev/pybox/internal/app"
)

// toolingVars are PYBOX_* variables that are not settings: the test
// suite's and CI's own (they configure tests, never the server).
var toolingVars = []string{"PYBOX_FS_SERVER", "PYBOX_INSPECTOR", "PYBOX_NPM_MODULES", "PYBOX_PODMAN_HOST", "PYBOX_SOAK_CALLS", "PYBOX_SOAK",
	"PYBOX_K8S_BIN", "PYBOX_K8S_BENCH_LOG", "PYBOX_K8S_BENCH_N"}

// toolingPrefixes likewise (PYBOX_DOCTOR* are `pybox doctor`'s probes).
var toolingPrefixes = []string{"PYBOX_REQUIRE_", "PYBOX_E2E_", "PYBOX_TEST_", "PYBOX_DOCTOR"}

// warnUnknownEnv writes a warning for every PYBOX_* variable in environ
// that is no setting of any command, naming the setting nearest to it: a
// mistyped name is otherwise ignored without a word (PYBOX_TOKENS_FILE
// for PYBOX_TOKENS would serve everyone without authentication).
func warnUnknownEnv(w io.Writer, environ []string) {
	known := (&config{Config: app.Config{Serving: true}}).settingVars()
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "PYBOX_") || slices.Contains(known, name) || toolingVar(name) || app.InternalVar(name) {
			continue
		}
		fmt.Fprintf(w, "pybox: warning: %s is not a pybox setting and is ignored; did you mean %s? (pybox --help lists them)\n",
			name, nearest(name, known))
	}
}

func toolingVar(name string) bool {
	if slices.Contains(toolingVars, name) {
		return true
	}
	return slices.ContainsFunc(toolingPrefixes, func(p string) bool { return strings.HasPrefix(name, p) })
}

// settingVars lists the environment variables of every setting.
func (c *config) settingVars() []string {
	var out []string
	for _, s := range c.settings() {
		out = append(out, s.env)
	}
	return out
}

// nearest is the name in names closest to name (edit distance).
func nearest(name string, names []string) string {
	best, bestD := "", -1
	for _, n := range names {
		if d := editDistance(name, n); bestD < 0 || d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
