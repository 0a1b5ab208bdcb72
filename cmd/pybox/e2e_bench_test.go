//go:build !windows

package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/pybox-dev/pybox/internal/testenv"
)

// TestBenchReport: `pybox bench` measures every scenario through a real
// MCP client and prints the table and the JSON report.
func TestBenchReport(t *testing.T) {
	// The bench installs only packages of its own, whose layers it removes
	// and no other (TestBenchRemovesOnlyItsLayers), and the layer-cache
	// lock's holders leave them alone (testenv.Layers.New): it needs no lock.
	parallelTest(t)
	eng := testenv.Docker(t)
	testenv.RuntimeImage(t, eng, "base")
	cmd := exec.Command(pyboxBin, "bench", "-n", "2", "-json", "-")
	cmd.Env = append(os.Environ(), "PYBOX_BUILD=never")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("pybox bench: %v\n%s", err, out)
	}
	var rep benchReport
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("report %q: %v", out, err)
	}
	for _, want := range []string{"execute_code print(1)", "docker run --rm", "install_dependencies, first install",
		"install_dependencies, cache hit", "execute_code in a live session", "execute_code print(1) over HTTP", "execute_code in a live session over HTTP", "20 HTTP clients"} {
		r := rep.row(want)
		if r == nil || (r.Skipped == "" && (r.N < 2 || r.P50MS <= 0 || r.P95MS < r.P50MS)) {
			t.Errorf("row %q: %+v", want, r)
		}
	}
	// The install rows need only the bench's own wheelhouse: measured,
	// whatever the tests beside it do with their layers.
	for _, want := range []string{"install_dependencies, first install", "install_dependencies, cache hit", "execute_code after the installs"} {
		if r := rep.row(want); r == nil || r.Skipped != "" {
			t.Errorf("row %q must be measured: %+v", want, r)
		}
	}
	if r := rep.row("execute_code print(1)"); r == nil || r.Skipped != "" || rep.ServerRSSMiB <= 0 {
		t.Errorf("the MCP row must be measured and the server's memory reported: %+v rss %v", r, rep.ServerRSSMiB)
	}
	// The burst's cold runs are counted from the daemon's live stream
	// (engine.WatchContainerCreates), whatever else the daemon does.
	if r := rep.row("burst:"); r == nil || r.Skipped == "" && !regexp.MustCompile(`^cold path: \d+ of 20 `).MatchString(r.Note) {
		t.Errorf("the burst row does not count its cold runs: %+v", r)
	}
	if strings.Contains(string(out), "unexpected result") {
		t.Errorf("a scenario failed: %s", out)
	}
}

// TestBenchEvalReport: `pybox bench -eval` measures pybox eval, a docker
// run loop and a pybox run loop on both batches, every sample passing.
func TestBenchEvalReport(t *testing.T) {
	parallelTest(t) // its servers and folders are its own; it installs nothing
	testenv.RuntimeImage(t, testenv.Docker(t), "base")
	cmd := exec.Command(pyboxBin, "bench", "-eval", "-n", "2", "-eval-trivial", "6", "-eval-work", "3", "-json", "-")
	cmd.Env = append(os.Environ(), "PYBOX_BUILD=never")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("pybox bench -eval: %v\n%s", err, out)
	}
	var rep evalBenchReport
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("report %q: %v", out, err)
	}
	if len(rep.Rows) != 6 {
		t.Fatalf("%d rows; want 6: %+v", len(rep.Rows), rep.Rows)
	}
	for _, r := range rep.Rows {
		if r.Skipped != "" || r.NotPassed != 0 || r.PerSecond <= 0 || r.Samples == 0 {
			t.Errorf("row %+v: want every sample measured and passing", r)
		}
	}
}

// TestBenchCodeMode: `pybox bench -codemode` runs the workflow both ways
// and prints both rows and the context ratio.
func TestBenchCodeMode(t *testing.T) {
	parallelTest(t) // its servers and folders are its own; it installs nothing
	testenv.RuntimeImage(t, testenv.Docker(t), "base")
	cmd := exec.Command(pyboxBin, "bench", "-codemode", "-n", "2")
	cmd.Env = append(os.Environ(), "PYBOX_BUILD=never")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("pybox bench -codemode: %v\n%s", err, out)
	}
	for _, want := range []string{"three tool calls, one by one", "one code-mode execute_code", "context bytes: code mode uses"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
}
