package app

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

func TestHostPath(t *testing.T) {
	home, err := os.UserHomeDir()
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]string{
		"":         "",
		"~":        home,
		"~/code":   filepath.Join(home, "code"),
		"~/a/../b": filepath.Join(home, "b"),
	}
	if runtime.GOOS == "windows" {
		tests[`~\code`] = filepath.Join(home, "code")
		tests[`C:\Users\me\code`] = `C:\Users\me\code`
		tests[`C:/Users/me/code`] = `C:\Users\me\code`
		tests[`C:\Users\me\code\`] = `C:\Users\me\code`
	} else {
		tests["/srv/code/"] = "/srv/code"
		tests["~user/x"] = filepath.Join(mustWd(t), "~user/x") // only the user's own home is expanded
	}
	for in, want := range tests {
		if got := hostPath(in); got != want {
			t.Errorf("hostPath(%q) = %q, want %q", in, got, want)
		}
	}
}

func mustWd(t *testing.T) string {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return wd
}
