package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestUnknownEnvWarned: a mistyped PYBOX_* variable is named at start,
// with the setting nearest to it; real settings and the test suite's own
// variables are not.
func TestUnknownEnvWarned(t *testing.T) {
	t.Setenv("PYBOX_TOKENS_FILE", "/tmp/tokens")
	t.Setenv("PYBOX_MEMROY", "1g")
	t.Setenv("PYBOX_TIMEOUT", "5s")
	t.Setenv("PYBOX_REQUIRE_DOCKER", "1")
	var out bytes.Buffer
	c := &config{serving: true}
	fs := newFlags("serve", "pybox serve", &out, c)
	if err := c.parseFlags(fs, nil); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{"PYBOX_TOKENS_FILE is not a pybox setting and is ignored; did you mean PYBOX_TOKENS?",
		"PYBOX_MEMROY is not a pybox setting and is ignored; did you mean PYBOX_MEMORY?"} {
		if !strings.Contains(got, want) {
			t.Errorf("stderr lacks %q:\n%s", want, got)
		}
	}
	for _, not := range []string{"PYBOX_TIMEOUT", "PYBOX_REQUIRE_DOCKER"} {
		if strings.Contains(got, not) {
			t.Errorf("a warning names %s, which is known:\n%s", not, got)
		}
	}
}
