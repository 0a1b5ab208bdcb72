package images

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestRunnerEndsWhenNobodySpeaks: a runner whose stdin stays open but that
// pybox never speaks to (a pod created while its server was killed, which
// nobody attached to) ends by itself within GREET, instead of running until
// a reaper finds it. On the old runner the container ran until the run's
// two-minute limit. PYBOX_GREET shortens GREET to 3 s here (the default,
// 60 s, is TestRunnerGreetDefault's).
func TestRunnerEndsWhenNobodySpeaks(t *testing.T) {
	eng := requireDocker(t)
	b, _ := testBuilder(t, eng)
	if _, err := b.Ensure(t.Context(), "base"); err != nil {
		t.Fatal(err)
	}
	const greet = 3 * time.Second
	start := time.Now()
	args := RunnerArgs()
	out := sandboxRun(t, eng, Tag("base"), nil, []string{"PYBOX_GREET=3"}, "/bin/sh", "-c",
		// stdin: a FIFO held open by a writer that never writes
		`mkfifo /tmp/in || exit 1; sleep 600 > /tmp/in & exec `+VenvPython+` "$1" "$2" "$3" "$4" once < /tmp/in`,
		"sh", args[0], args[1], args[2], args[3])
	took := time.Since(start)
	t.Logf("the runner ended %s after its start, unspoken to", took.Round(100*time.Millisecond))
	if out != "" {
		t.Errorf("a runner nobody spoke to wrote %q; want nothing (not even ready)", out)
	}
	if took < greet {
		t.Errorf("the runner ended after %s; want GREET (%s) at least: it must wait for a slow attach", took, greet)
	}
	if took > 45*time.Second {
		t.Errorf("the runner ended after %s; want about its GREET (%s), not the default minute", took, greet)
	}
}

// TestRunnerGreetDefault: the supervisor waits 60 s for pybox's first
// bytes unless PYBOX_GREET says fewer (never more, never under a second),
// and the variable does not reach the program. It runs the supervisor's
// own definitions with this host's python3.
func TestRunnerGreetDefault(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 on this host")
	}
	src := strings.TrimSuffix(strings.TrimSpace(string(supervisorPy)), "sys.exit(main(sys.argv[1:]))")
	probe := src + `
import os
for v in (None, "3", "0.5", "600", "nonsense"):
    os.environ.pop("PYBOX_GREET", None)
    if v is not None:
        os.environ["PYBOX_GREET"] = v
    print(v, greet_seconds(), "PYBOX_GREET" in os.environ)
`
	cmd := exec.Command(py, "-I", "-c", probe)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python3: %v\n%s", err, stderr.String())
	}
	want := "None 60 False\n3 3.0 False\n0.5 1.0 False\n600 60 False\nnonsense 60 False\n"
	if string(out) != want {
		t.Errorf("GREET by PYBOX_GREET:\n%s\nwant:\n%s", out, want)
	}
}
