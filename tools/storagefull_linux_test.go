package tools

import (
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pybox-dev/pybox/internal/storage"
	"github.com/pybox-dev/pybox/internal/testenv"
	"github.com/pybox-dev/pybox/sandbox"
)

// TestFullStorageIsAQuotaRefusal: when the filesystem under code storage
// has no room left (here a tmpfs out of inodes; in use, the owner's quota
// filesystem full), saving a program's file and creating a code file are
// refused as the storage quota (make room), not reported as pybox's
// internal failure, which is what saving a run's program was.
func TestFullStorageIsAQuotaRefusal(t *testing.T) {
	root := testenv.SmallFS(t)
	d, err := storage.Open(filepath.Join(root, "store"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	h := &handlers{cfg: Config{Storage: d, MaxCodeBytes: 1 << 20, MaxFileBytes: 1 << 20, Log: slog.New(slog.DiscardHandler)}}
	testenv.Fill(t, root)
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
