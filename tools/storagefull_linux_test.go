package tools

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/pybox-dev/pybox/internal/storage"
	"github.com/pybox-dev/pybox/sandbox"
)

// TestFullStorageIsAQuotaRefusal: when the filesystem under code storage
// has no room left (here a tmpfs out of inodes; in use, the owner's quota
// filesystem full), saving a program's file and creating a code file are
// refused as the storage quota (make room), not reported as pybox's
// internal failure, which is what saving a run's program was.
func TestFullStorageIsAQuotaRefusal(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	root := t.TempDir()
	if err := syscall.Mount("tmpfs", root, "tmpfs", 0, "size=1m,nr_inodes=32,mode=0755"); err != nil {
		t.Skipf("mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(root, syscall.MNT_DETACH) })
	d, err := storage.Open(filepath.Join(root, "store"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	h := &handlers{cfg: Config{Storage: d, MaxCodeBytes: 1 << 20, MaxFileBytes: 1 << 20, Log: slog.New(slog.DiscardHandler)}}
	for i := 0; ; i++ {
		err := os.WriteFile(filepath.Join(root, fmt.Sprintf("f%d", i)), nil, 0o644)
		if errors.Is(err, syscall.ENOSPC) {
			break
		}
		if err != nil || i > 1000 {
			t.Fatalf("filling the tmpfs: %v after %d files", err, i)
		}
	}
	f, err := h.codeFile("print(1)", "prog", "")
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, sandbox.ErrQuota) || errors.Is(err, errSave) || !strings.Contains(err.Error(), "delete files to make room") {
			t.Errorf("%s on a full storage: %v; want a refusal for the quota that says to make room", what, err)
		}
	}
	check("saving a run's program", f.save())
	_, _, err = h.initializeCodeFile(t.Context(), nil, InitializeCodeFileInput{Content: "x = 1", Filename: "prog"})
	check("initialize_code_file", err)
}
