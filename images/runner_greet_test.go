package images

import (
	"testing"
	"time"
)

// TestRunnerEndsWhenNobodySpeaks: a runner whose stdin stays open but that
// pybox never speaks to (a pod created while its server was killed, which
// nobody attached to) ends by itself within GREET, instead of running until
// a reaper finds it. On the old runner the container ran until the run's
// two-minute limit.
func TestRunnerEndsWhenNobodySpeaks(t *testing.T) {
	eng := requireDocker(t)
	b, _ := testBuilder(t, eng)
	if _, err := b.Ensure(t.Context(), "base"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	args := RunnerArgs()
	out := sandboxRun(t, eng, Tag("base"), nil, nil, "/bin/sh", "-c",
		// stdin: a FIFO held open by a writer that never writes
		`mkfifo /tmp/in || exit 1; sleep 600 > /tmp/in & exec `+VenvPython+` "$1" "$2" "$3" "$4" once < /tmp/in`,
		"sh", args[0], args[1], args[2], args[3])
	took := time.Since(start)
	t.Logf("the runner ended %s after its start, unspoken to", took.Round(time.Second))
	if out != "" {
		t.Errorf("a runner nobody spoke to wrote %q; want nothing (not even ready)", out)
	}
	if took < 50*time.Second {
		t.Errorf("the runner ended after %s; want about GREET (60 s): it must wait for a slow attach", took)
	}
}
