package bench

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestSummarise: a scenario's figures are the sorted durations' minimum,
// median and 95th percentile, in milliseconds to two places.
func TestSummarise(t *testing.T) {
	var ds []time.Duration
	for i := 20; i >= 1; i-- { // 20 ms .. 1 ms, unsorted
		ds = append(ds, time.Duration(i)*time.Millisecond+250*time.Microsecond)
	}
	got := summarise("warm", ds)
	want := Row{Name: "warm", N: 20, MinMS: 1.25, P50MS: 10.25, P95MS: 19.25}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if got := summarise("one", []time.Duration{3 * time.Millisecond}); got.P50MS != 3 || got.P95MS != 3 || got.MinMS != 3 {
		t.Errorf("one sample: %+v; want 3 ms everywhere", got)
	}
}

// TestWriteReport: the table names every row (a skipped one with its
// reason), the ratio and the memory, then the JSON, which -json also
// writes to its file; "-" writes only the JSON.
func TestWriteReport(t *testing.T) {
	rep := Report{Image: "img:1", RatioMCPToDockerRun: 0.5, ServerRSSMiB: 42.5, Rows: []Row{
		{Name: "execute_code print(1)", N: 5, P50MS: 12.3, P95MS: 20, MinMS: 10},
		{Name: "runsc", Skipped: "no runsc"},
	}}
	file := filepath.Join(t.TempDir(), "rep.json")
	var out strings.Builder
	if err := writeReport(rep, file, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"execute_code print(1)  5  12.3", "runsc", "skipped: no runsc", "= 0.50", "42.5 MiB", "JSON:\n{"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(rep, back); diff != "" {
		t.Errorf("the JSON file (-want +got):\n%s", diff)
	}
	if r := back.Find("execute_code"); r == nil || r.P50MS != 12.3 {
		t.Errorf("Find(execute_code) = %+v", r)
	}
	if r := back.Find("docker run"); r != nil {
		t.Errorf("Find of a missing row = %+v; want nil", r)
	}
	out.Reset()
	if err := writeReport(rep, "-", &out); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(out.String()), &back); err != nil || strings.Contains(out.String(), "scenario") {
		t.Errorf(`-json -: want only the JSON, got %q (%v)`, out.String(), err)
	}
}

// TestOptionsCheck: options no bench can run with are refused before
// anything starts.
func TestOptionsCheck(t *testing.T) {
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{N: 2}, ""},
		{Options{N: 1}, "-n must be at least 2"},
		{Options{N: 5, Eval: true, EvalTrivial: 0, EvalWork: 3}, "-eval-trivial and -eval-work"},
		{Options{N: 5, Eval: true, EvalTrivial: 1, EvalWork: 1}, ""},
	} {
		err := tc.o.Check()
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: %v; want %q", tc.o, err, tc.want)
		}
	}
}

// TestLoadRowsFollowN: the load rows' size follows -n, the default's
// being the rows' historical 4 x 25 calls and 20 s.
func TestLoadRowsFollowN(t *testing.T) {
	for _, c := range []struct {
		n     int
		calls int
		span  time.Duration
	}{{20, 25, 20 * time.Second}, {2, 2, 2 * time.Second}, {10, 12, 10 * time.Second}, {100, 125, 100 * time.Second}} {
		if got := loadCalls(c.n); got != c.calls {
			t.Errorf("-n %d: %d calls a caller; want %d", c.n, got, c.calls)
		}
		if got := loadSpan(c.n); got != c.span {
			t.Errorf("-n %d: HTTP clients for %v; want %v", c.n, got, c.span)
		}
	}
}
