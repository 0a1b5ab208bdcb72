package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pybox-dev/pybox/internal/app"
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
	c := &config{Config: app.Config{Serving: true}}
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

// TestOldInstallNetworkWarned: the install network's old values (bridge,
// host) still start, taken as the index, and say so.
func TestOldInstallNetworkWarned(t *testing.T) {
	for _, v := range []string{"bridge", "host", "index"} {
		t.Setenv("PYBOX_INSTALL_NETWORK", v)
		var out bytes.Buffer
		c := &config{Config: app.Config{Serving: true}}
		if err := c.parseFlags(newFlags("serve", "pybox serve", &out, c), nil); err != nil {
			t.Fatal(err)
		}
		idx, err := c.Index()
		if err != nil || idx.Network != "index" {
			t.Errorf("%s: install network %q, %v; want index", v, idx.Network, err)
		}
		warned := strings.Contains(out.String(), `install network "`+v+`" is taken as "index"`)
		if warned != (v != "index") {
			t.Errorf("%s: warned %v:\n%s", v, warned, out.String())
		}
	}
}

// TestParentDirsNotWarned: the variable a pybox sets for the servers it
// starts (app.ParentDirsVar) is no mistyped setting.
func TestParentDirsNotWarned(t *testing.T) {
	parent := &app.Config{StorageDir: filepath.Join(t.TempDir(), "code"), StateDir: filepath.Join(t.TempDir(), "state")}
	var warned strings.Builder
	warnUnknownEnv(&warned, []string{app.ParentDirsVar + "=" + parent.ParentDirs()[app.ParentDirsVar]})
	if warned.Len() > 0 {
		t.Errorf("pybox's own marker is warned about: %s", warned.String())
	}
}
