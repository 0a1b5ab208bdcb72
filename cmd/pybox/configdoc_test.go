package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The configuration reference, docs/configuration.md, is rendered from the
// settings table (config.go) and each command's flag set, the ones --help
// prints; TestConfigurationReference fails when the file differs.
const (
	referencePath  = "../../docs/configuration.md"
	referenceRegen = "go test ./cmd/pybox -run TestConfigurationReference -update"
)

// update rewrites golden files (here and in e2e_toolsets_test.go) and the reference.
var update = flag.Bool("update", false, "rewrite golden files and docs/configuration.md")

// helpFlags catches a command's flag set where its --help would print it.
type helpFlags struct {
	synopsis string
	fs       *flag.FlagSet
	c        *config
}

func (h *helpFlags) Write(p []byte) (int, error) { return len(p), nil }

func (h *helpFlags) reportFlags(synopsis string, fs *flag.FlagSet, c *config) {
	h.synopsis, h.fs, h.c = synopsis, fs, c
}

// commandFlags runs "pybox ARGS --help" and returns the flag set it made.
func commandFlags(t *testing.T, args ...string) *helpFlags {
	t.Helper()
	h := &helpFlags{}
	if code := run(context.Background(), append(args, "--help"), strings.NewReader(""), io.Discard, h); code != 0 || h.fs == nil {
		t.Fatalf("pybox %s --help: exit %d, flag set caught: %v", strings.Join(args, " "), code, h.fs != nil)
	}
	return h
}

// referenceCommands are the commands the reference has a section for.
var referenceCommands = [][]string{{"serve"}, {"run"}, {"eval"}, {"bench"}, {"doctor"}, {"gc"}, {"image", "build"}}

// docDefaults are the defaults that depend on the machine, as the reference says them.
var docDefaults = map[string]string{
	"code-storage-dir": "`$XDG_DATA_HOME/pybox/code` or `~/.local/share/pybox/code`",
	"state-dir":        "`$XDG_STATE_HOME/pybox` or `~/.local/state/pybox`",
	"mcp-servers":      "`STATE_DIR/mcp_servers.json`",
}

const referenceIntro = `# Configuration

<!-- Generated from the settings table in cmd/pybox/config.go and each command's flags, as --help
prints them. Do not edit: change the table, then run ` + referenceRegen + ` -->

Every setting is a flag and an environment variable; a flag on the command line wins over the
variable, the variable over the [policy](policies.md), and the policy over the built-in default.
A ` + "`PYBOX_*`" + ` variable that is no setting (a typo such as ` + "`PYBOX_TOKENS_FILE` for `PYBOX_TOKENS`" + `) is named at
start with a warning on stderr, with the setting nearest to it; it is ignored.

Each command has the settings it uses, and its ` + "`--help`" + ` lists those alone: a flag of a setting
the command has not is refused, naming the command; the environment variable of one is ignored
(the setting keeps its default there). ` + "`pybox`" + ` with no command is ` + "`pybox serve`" + `: the MCP server over stdio,
or over HTTP with ` + "`--http`" + `. The [workspace quota](quota.md) and the [HTTP settings](http.md) have
pages of their own.
`

// renderReference renders docs/configuration.md.
func renderReference(t *testing.T) string {
	var b strings.Builder
	b.WriteString(referenceIntro)
	b.WriteString("\n## Settings\n\n| flag | variable | default | meaning | commands |\n|---|---|---|---|---|\n")
	serve := commandFlags(t, "serve")
	for _, s := range everySetting() {
		f := serve.fs.Lookup(s.flag)
		fmt.Fprintf(&b, "| `--%s` | `%s` | %s | %s | %s |\n", s.flag, s.env, docDefault(f), mdCell(s.usage), strings.Join(commandsWith(s.flag), ", "))
	}
	for _, args := range referenceCommands {
		h := commandFlags(t, args...)
		fmt.Fprintf(&b, "\n## `pybox %s`\n\n```\n%s\n```\n", strings.Join(args, " "), strings.TrimSpace(h.synopsis))
		var own, settings []string
		h.fs.VisitAll(func(f *flag.Flag) {
			if h.c != nil && h.c.has(f.Name) {
				settings = append(settings, "`--"+f.Name+"`")
				return
			}
			own = append(own, fmt.Sprintf("| `-%s` | %s | %s |", f.Name, docDefault(f), mdCell(f.Usage)))
		})
		if len(own) > 0 {
			fmt.Fprintf(&b, "\nIts own flags:\n\n| flag | default | meaning |\n|---|---|---|\n%s\n", strings.Join(own, "\n"))
		}
		if len(settings) > 0 {
			fmt.Fprintf(&b, "\nSettings (%d, in the table above): %s\n", len(settings), strings.Join(settings, ", "))
		}
	}
	return b.String()
}

// docDefault is a flag's default as the reference shows it.
func docDefault(f *flag.Flag) string {
	if d, ok := docDefaults[f.Name]; ok {
		return d
	}
	if f.DefValue == "" {
		return ""
	}
	return "`" + f.DefValue + "`"
}

// mdCell escapes text for a Markdown table cell.
func mdCell(s string) string {
	return strings.NewReplacer(`\`, `\\`, "|", `\|`, "<", "&lt;", "*", `\*`, "\n", " ").Replace(s)
}

// TestConfigurationReference: docs/configuration.md is what the settings
// table and the commands' flags render; -update rewrites it.
func TestConfigurationReference(t *testing.T) {
	t.Setenv("PYBOX_DEBIAN_MIRROR", "") // image build's default comes from it
	got := renderReference(t)
	if *update {
		if err := os.WriteFile(referencePath, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	b, err := os.ReadFile(referencePath)
	if err != nil {
		t.Fatal(err)
	}
	if want := string(b); want != got {
		t.Errorf("docs/configuration.md is not what the settings table renders (%s); regenerate it: %s",
			firstDiff(want, got), referenceRegen)
	}
}

// firstDiff names the first line where a and b differ.
func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range max(len(al), len(bl)) {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return fmt.Sprintf("line %d: file %q, table %q", i+1, x, y)
		}
	}
	return "same lines"
}

// TestSettingsTablesInDocs: the pages that keep a longer table of some
// settings of their own (http.md, tools.md: "| variable | flag | default |
// meaning |") name each setting as the settings table does: its variable,
// its flag and its default cannot drift from --help, only the longer text
// is the page's own.
func TestSettingsTablesInDocs(t *testing.T) {
	serve := commandFlags(t, "serve")
	envOf := map[string]string{}
	for _, s := range everySetting() {
		envOf[s.flag] = s.env
	}
	pages, err := filepath.Glob("../../docs/*.md")
	if err != nil || len(pages) == 0 {
		t.Fatalf("docs pages: %v (%d)", err, len(pages))
	}
	rows := 0
	for _, page := range pages {
		if filepath.Base(page) == "configuration.md" {
			continue // generated whole: TestConfigurationReference
		}
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		in := false
		for i, line := range strings.Split(string(b), "\n") {
			switch {
			case line == "| variable | flag | default | meaning |":
				in = true
				continue
			case !strings.HasPrefix(line, "|"):
				in = false
			}
			if !in || strings.HasPrefix(line, "|---") {
				continue
			}
			cells := strings.SplitN(strings.TrimPrefix(line, "|"), "|", 4)
			for j := range cells {
				cells[j] = strings.TrimSpace(cells[j])
			}
			if len(cells) < 4 {
				t.Errorf("%s:%d: not a settings row: %q", page, i+1, line)
				continue
			}
			env := strings.Trim(cells[0], "`")
			name := strings.TrimPrefix(strings.Trim(cells[1], "`"), "--")
			f := serve.fs.Lookup(name)
			switch {
			case f == nil || envOf[name] == "":
				t.Errorf("%s:%d: --%s is no setting", page, i+1, name)
			case envOf[name] != env:
				t.Errorf("%s:%d: --%s's variable is %s, the page says %s", page, i+1, name, envOf[name], env)
			case docDefault(f) != cells[2]:
				t.Errorf("%s:%d: --%s's default is %q, the page says %q", page, i+1, name, docDefault(f), cells[2])
			}
			rows++
		}
	}
	if rows < 10 {
		t.Errorf("found %d settings rows in docs/, expected the HTTP and code-mode tables (at least 10)", rows)
	}
}
