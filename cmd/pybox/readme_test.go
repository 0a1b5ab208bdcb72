package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/pybox-dev/pybox/internal/app"
	"github.com/pybox-dev/pybox/tools"
)

// docPages are the README and every page under docs/, by path from the
// repository's root.
func docPages(t *testing.T) map[string]string {
	t.Helper()
	paths, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	pages := map[string]string{}
	for _, p := range append([]string{"../../README.md"}, paths...) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		pages[strings.TrimPrefix(filepath.ToSlash(p), "../../")] = string(b)
	}
	if len(pages) < 2 {
		t.Fatalf("found %d documentation pages; want the README and docs/*.md", len(pages))
	}
	return pages
}

// TestREADMEDocumentsEverything: every setting's variable and flag, every
// tool set and every tool appear in the README or a docs/ page; the tool
// sets and the tools of the default set on the README itself.
func TestREADMEDocumentsEverything(t *testing.T) {
	pages := docPages(t)
	var all strings.Builder
	for _, text := range pages {
		all.WriteString(text)
	}
	docs := all.String()
	var want []string
	for _, s := range (&config{Config: app.Config{Serving: true}}).settings() {
		want = append(want, "`"+s.env+"`", "`--"+s.flag+"`")
	}
	for _, set := range tools.Toolsets() {
		want = append(want, "`"+set+"`")
		for _, name := range tools.ToolNames(set) {
			want = append(want, "`"+name+"`")
		}
	}
	for _, w := range want {
		if !strings.Contains(docs, w) {
			t.Errorf("neither the README nor docs/*.md mentions %s", w)
		}
	}
	front := append(tools.Toolsets(), tools.ToolNames(tools.ToolsetDefault)...)
	for _, w := range front {
		if !strings.Contains(pages["README.md"], "`"+w+"`") {
			t.Errorf("the README's tool list does not mention `%s`", w)
		}
	}
}

// mdLink is a Markdown link's target: [text](target).
var mdLink = regexp.MustCompile(`\]\(([^()\s]+)\)`)

// TestDocsLinks: every relative link in the README and docs/*.md names a
// file that exists, and its #anchor (if any) a heading of that page.
func TestDocsLinks(t *testing.T) {
	pages := docPages(t)
	checked := 0
	for page, text := range pages {
		for _, m := range mdLink.FindAllStringSubmatch(withoutCode(text), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			dest := page
			if file != "" {
				dest = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(page), file)))
			}
			checked++
			if _, err := os.Stat(filepath.Join("../..", dest)); err != nil {
				t.Errorf("%s links to %s: no such file", page, target)
				continue
			}
			if anchor == "" {
				continue
			}
			destText, ok := pages[dest]
			if !ok {
				t.Errorf("%s links to %s: an anchor in a file that is no docs page", page, target)
				continue
			}
			if !anchors(destText)[anchor] {
				t.Errorf("%s links to %s: %s has no heading with that anchor", page, target, dest)
			}
		}
	}
	if checked < 10 {
		t.Errorf("checked %d relative links; the README alone links every docs page", checked)
	}
}

// withoutCode is text without its fenced code blocks.
func withoutCode(text string) string {
	var b strings.Builder
	fence := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "```") {
			fence = !fence
			continue
		}
		if !fence {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// anchors are the GitHub anchors of text's headings: lower case, spaces
// as hyphens, punctuation other than hyphens and underscores dropped.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	for _, line := range strings.Split(withoutCode(text), "\n") {
		title, ok := strings.CutPrefix(strings.TrimLeft(line, "#"), " ")
		if !ok || !strings.HasPrefix(line, "#") {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(title) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
				b.WriteRune(r)
			}
		}
		out[b.String()] = true
	}
	return out
}

// TestAnchors: the anchors GitHub gives headings with code and punctuation.
func TestAnchors(t *testing.T) {
	got := anchors("# Title\n## gVisor (`runsc`): a second wall\n```\n# not a heading\n```\n### Leftover containers and `pybox gc`\n")
	for _, want := range []string{"title", "gvisor-runsc-a-second-wall", "leftover-containers-and-pybox-gc"} {
		if !got[want] {
			t.Errorf("anchors lack %q: %v", want, got)
		}
	}
	if got["not-a-heading"] {
		t.Error("a comment in a code block was taken as a heading")
	}
}
