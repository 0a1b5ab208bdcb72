//go:build !windows

package storage_test

import (
	"io/fs"
	"net"
	"syscall"
	"testing"
)

// specialFiles: the platform has FIFOs and unix sockets in folders.
const specialFiles = true

// plantSpecial makes a FIFO and a listening unix socket in the folder.
func plantSpecial(t *testing.T, at func(string) string) {
	t.Helper()
	if err := syscall.Mkfifo(at("fifo.py"), 0o666); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", at("sock.py"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
}

// fileOwner is the uid and gid of fi.
func fileOwner(fi fs.FileInfo) (uid, gid int, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return int(st.Uid), int(st.Gid), true
}

// modeBits: files have Unix permission bits.
const modeBits = true

func skipOnWine(*testing.T, string) {}

const symlinksPlanted = ""
