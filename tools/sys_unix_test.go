//go:build !windows

package tools

import (
	"io/fs"
	"syscall"
	"testing"
)

// mkfifo makes a FIFO at path.
func mkfifo(t *testing.T, path string) {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o666); err != nil {
		t.Fatal(err)
	}
}

// fileOwner is fi's uid and gid.
func fileOwner(t *testing.T, fi fs.FileInfo) [2]uint32 {
	st := fi.Sys().(*syscall.Stat_t)
	return [2]uint32{st.Uid, st.Gid}
}
