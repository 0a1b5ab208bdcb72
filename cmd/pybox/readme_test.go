package main

import (
	"os"
	"strings"
	"testing"

	"github.com/pybox-dev/pybox/tools"
)

// TestREADMEDocumentsEverything: every setting's variable and flag, every
// tool set and every tool appear in the README.
func TestREADMEDocumentsEverything(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	var want []string
	for _, s := range (&config{serving: true}).settings() {
		want = append(want, "`"+s.env+"`", "`--"+s.flag+"`")
	}
	for _, set := range tools.Toolsets() {
		want = append(want, "`"+set+"`")
		for _, name := range tools.ToolNames(set) {
			want = append(want, "`"+name+"`")
		}
	}
	for _, w := range want {
		if !strings.Contains(readme, w) {
			t.Errorf("README does not mention %s", w)
		}
	}
}
