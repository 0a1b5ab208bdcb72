package tools

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/pybox-dev/pybox/sandbox"
)

// privateOutputs makes a run's private output folder, as the sandbox
// does, holding files (relative path -> content).
func privateOutputs(t *testing.T, name string, files map[string][]byte) *sandbox.Outputs {
	t.Helper()
	o := &sandbox.Outputs{Name: name, Dir: filepath.Join(t.TempDir(), name)}
	for rel, data := range files {
		p := filepath.Join(o.Dir, rel)
		mustDo(t, os.MkdirAll(filepath.Dir(p), 0o755))
		mustDo(t, os.WriteFile(p, data, 0o644))
	}
	return o
}

// TestOutputsAreTheRunsOwn: a run's result lists only the files of its own
// private folder (figures attached), copies them into code storage under
// outputs/<name>/, and lists nothing else of outputs/, whoever wrote it.
func TestOutputsAreTheRunsOwn(t *testing.T) {
	h := fileHandlers(t, 1<<10, 1<<20)
	fig := pngBytes(t, 4, 4, false)
	putFile(t, h, "outputs/table.csv", []byte("shared, not this run's\n"))
	putFile(t, h, "outputs/r1/figure-2.png", fig) // planted where r1's files will be copied
	o := privateOutputs(t, "r1", map[string][]byte{"figure-1.png": fig, "data/x.csv": []byte("a,b\n")})
	outs := h.runOutputs(context.Background(), o, h.cfg.Storage, nil)
	got0 := outs.collect()
	arts, figures, note := got0.arts, got0.figures, got0.note
	outs.close()
	var got []string
	for _, a := range arts {
		got = append(got, a.Path)
	}
	if diff := cmp.Diff([]string{"outputs/r1/data/x.csv", "outputs/r1/figure-1.png"}, got); diff != "" {
		t.Errorf("artifacts (-want +got):\n%s", diff)
	}
	if len(figures) != 1 || note != "" {
		t.Errorf("%d figures, note %q; want its own one figure", len(figures), note)
	}
	if b, err := os.ReadFile(filepath.Join(h.cfg.Storage.Path(), "outputs/r1/data/x.csv")); err != nil || string(b) != "a,b\n" {
		t.Errorf("the run's file was not kept in code storage: %q %v", b, err)
	}
	if _, err := os.Stat(o.Dir); !os.IsNotExist(err) {
		t.Errorf("the private folder is still there: %v", err)
	}
}

// TestOutputsSymlinksStayInside: a symlink the run left in its folder is
// neither listed, nor followed when the files are kept.
func TestOutputsSymlinksStayInside(t *testing.T) {
	h := fileHandlers(t, 1<<10, 1<<20)
	o := privateOutputs(t, "r2", map[string][]byte{"ok.txt": []byte("ok")})
	mustDo(t, os.Symlink("/etc/passwd", filepath.Join(o.Dir, "passwd")))
	outs := h.runOutputs(context.Background(), o, h.cfg.Storage, nil)
	arts := outs.collect().arts
	outs.close()
	if len(arts) != 1 || arts[0].Path != "outputs/r2/ok.txt" {
		t.Errorf("artifacts %+v; want only ok.txt", arts)
	}
	if _, err := os.Lstat(filepath.Join(h.cfg.Storage.Path(), "outputs/r2/passwd")); !os.IsNotExist(err) {
		t.Errorf("the symlink was kept: %v", err)
	}
}

// TestOutputsHugeTree: a program that fills its folder with files cannot
// make collection walk forever; the result says the list is partial.
func TestOutputsHugeTree(t *testing.T) {
	h := fileHandlers(t, 1<<10, 1<<20)
	files := map[string][]byte{}
	for i := range maxOutputEntries + 10 {
		files[fmt.Sprintf("many/%d.txt", i)] = nil
	}
	outs := h.runOutputs(context.Background(), privateOutputs(t, "r3", files), h.cfg.Storage, nil)
	got0 := outs.collect()
	arts, note := got0.arts, got0.note
	outs.close()
	if len(arts) > maxArtifacts || !strings.Contains(note, "more than pybox lists") {
		t.Errorf("artifacts %d, note %q; want at most %d and a note that the list is partial", len(arts), note, maxArtifacts)
	}
}

// budget is an account with a fixed room.
type budget struct{ bytes, entries int64 }

func (b *budget) Take(n, e int64) error {
	if n > b.bytes || e > b.entries {
		return sandbox.ErrQuota
	}
	b.bytes, b.entries = b.bytes-n, b.entries-e
	return nil
}
func (b *budget) Close() {}

// TestOutputsCopyBackIsCharged: each file is counted at its apparent size
// before it is copied; one past the room is not saved, is named, and
// leaves nothing in code storage, while files that fit are saved.
func TestOutputsCopyBackIsCharged(t *testing.T) {
	h := fileHandlers(t, 1<<10, 1<<20)
	o := privateOutputs(t, "r4", map[string][]byte{"a.txt": []byte("kept"), "b.bin": nil, "sub/c.txt": []byte("kept too")})
	mustDo(t, os.Truncate(filepath.Join(o.Dir, "b.bin"), 1<<30)) // sparse: 1 GiB apparent
	outs := h.runOutputs(context.Background(), o, h.cfg.Storage, nil)
	room := &budget{bytes: 1 << 20, entries: 10}
	outs.account = func() account { return room }
	got := outs.collect()
	outs.close()
	var saved []string
	for _, a := range got.arts {
		saved = append(saved, a.Path)
	}
	if diff := cmp.Diff([]string{"outputs/r4/a.txt", "outputs/r4/sub/c.txt"}, saved); diff != "" {
		t.Errorf("saved (-want +got):\n%s", diff)
	}
	if len(got.notSaved) != 1 || got.notSaved[0].Path != "outputs/r4/b.bin" || !strings.Contains(got.note, "quota") || !strings.Contains(got.note, "b.bin") {
		t.Errorf("not saved %+v, note %q; want b.bin named, for the quota", got.notSaved, got.note)
	}
	if _, err := os.Lstat(filepath.Join(h.cfg.Storage.Path(), "outputs/r4/b.bin")); !os.IsNotExist(err) {
		t.Errorf("the file past the quota is in code storage: %v", err)
	}
	// a.txt (1 entry + outputs/ and outputs/r4), sub/c.txt (1 + sub/).
	if want := int64(1<<20 - 4 - 8); room.bytes != want || room.entries != 10-3-2 {
		t.Errorf("room left %d bytes, %d entries; want %d and 5", room.bytes, room.entries, want)
	}
}
