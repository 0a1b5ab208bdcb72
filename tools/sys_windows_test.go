package tools

import (
	"io/fs"
	"testing"
)

// mkfifo: Windows folders hold no FIFOs; the tests that plant one are
// about Unix hosts.
func mkfifo(t *testing.T, _ string) {
	t.Skip("Windows folders hold no FIFOs")
}

// fileOwner: Windows files have no uid and gid.
func fileOwner(t *testing.T, _ fs.FileInfo) [2]uint32 {
	t.Skip("Windows files have no uid and gid")
	return [2]uint32{}
}
