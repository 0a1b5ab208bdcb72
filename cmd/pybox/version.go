package main

import (
	"cmp"
	"fmt"
	"runtime"
	"runtime/debug"
)

// versionLine is what `pybox version` prints: the version, the commit it
// was built from (the linker's, else the one Go recorded), the platform.
func versionLine() string {
	c := commit
	if info, ok := debug.ReadBuildInfo(); ok && c == "" {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" {
				c = s.Value
			}
		}
	}
	return fmt.Sprintf("pybox %s (commit %s, %s/%s, %s)", version, cmp.Or(c, "unknown"), runtime.GOOS, runtime.GOARCH, runtime.Version())
}
