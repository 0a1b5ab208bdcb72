package tools

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestOutputsOfConcurrentRuns: two runs sharing a workspace each list
// their own figures and the files written directly under outputs/, never
// the other run's outputs/<run>/ folder.
func TestOutputsOfConcurrentRuns(t *testing.T) {
	h := fileHandlers(t, 1<<10, 1<<20)
	a, err := newOutputs(h.cfg.Storage)
	mustDo(t, err)
	b, err := newOutputs(h.cfg.Storage)
	mustDo(t, err)
	fig := pngBytes(t, 4, 4, false)
	putFile(t, h, a.run+"/figure-1.png", fig)
	putFile(t, h, b.run+"/figure-1.png", fig)
	putFile(t, h, b.run+"/figure-2.png", fig)
	putFile(t, h, "outputs/table.csv", []byte("a,b\n"))
	arts, figures, _ := a.collect()
	var got []string
	for _, art := range arts {
		got = append(got, art.Path)
	}
	want := []string{a.run + "/figure-1.png", "outputs/table.csv"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("artifacts of run a (-want +got):\n%s", diff)
	}
	if len(figures) != 1 {
		t.Errorf("run a got %d figures; want its own 1", len(figures))
	}
}

// TestOutputsHugeTree: a program that fills outputs/ with old files cannot
// make collection walk forever; the result says the list is partial.
func TestOutputsHugeTree(t *testing.T) {
	h := fileHandlers(t, 1<<10, 1<<20)
	for i := range maxOutputEntries + 10 {
		putFile(t, h, fmt.Sprintf("outputs/old/%d.txt", i), nil)
	}
	o, err := newOutputs(h.cfg.Storage)
	mustDo(t, err)
	o.since = time.Now().Add(time.Hour) // every file above predates the run
	arts, _, note := o.collect()
	if len(arts) != 0 || !strings.Contains(note, "more than pybox lists") {
		t.Errorf("artifacts %d, note %q; want none and a note that the walk stopped", len(arts), note)
	}
}
