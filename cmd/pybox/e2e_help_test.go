//go:build !windows

package main

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

// TestHelpPerCommand: the real binary's --help of each command lists its
// settings and not the others'; a flag of another's is refused by name.
func TestHelpPerCommand(t *testing.T) {
	for _, tt := range commandSettingsTable {
		t.Run(tt.cmd, func(t *testing.T) {
			var stderr bytes.Buffer
			cmd := exec.Command(pyboxBin, tt.cmd, "--help")
			cmd.Stderr = &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("pybox %s --help: %v\n%s", tt.cmd, err, stderr.String())
			}
			help := stderr.String()
			for _, name := range tt.has {
				if !strings.Contains(help, "  -"+name+" ") && !strings.Contains(help, "  -"+name+"\n") {
					t.Errorf("pybox %s --help does not list -%s", tt.cmd, name)
				}
			}
			for _, name := range tt.lacks {
				if strings.Contains(help, "  -"+name+" ") || strings.Contains(help, "  -"+name+"\n") || strings.Contains(help, " "+settingOf(t, name).env+" ") {
					t.Errorf("pybox %s --help lists -%s, which it does not use", tt.cmd, name)
				}
			}
			if len(tt.lacks) == 0 {
				return
			}
			out, err := exec.Command(pyboxBin, tt.cmd, "--"+tt.lacks[0]+"=x").CombinedOutput()
			want := "pybox " + tt.cmd + ": --" + tt.lacks[0] + " is not a setting of " + tt.cmd
			if code := exitStatus(err); code != 2 || !strings.Contains(string(out), want) {
				t.Errorf("pybox %s --%s=x: exit %d, output %q; want 2 and %q", tt.cmd, tt.lacks[0], code, out, want)
			}
		})
	}
}

// exitStatus is a finished command's exit status (-1: it did not run).
func exitStatus(err error) int {
	if err == nil {
		return 0
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	return -1
}
