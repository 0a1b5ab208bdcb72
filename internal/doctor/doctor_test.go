package doctor

import (
	"strings"
	"testing"
)

// TestLines: a failed check is marked FAIL and makes the whole doctor
// fail; passed ones are OK and leave it passing.
func TestLines(t *testing.T) {
	var out strings.Builder
	d := &doctor{out: &out, ok: true}
	d.line(true, "docker", "answers")
	if !d.ok {
		t.Fatal("a passed check failed the doctor")
	}
	d.line(false, "runtime image", "missing")
	d.line(true, "runtimes", "runc")
	if d.ok {
		t.Error("a failed check did not fail the doctor")
	}
	for _, want := range []string{"OK   docker", "FAIL runtime image", "missing", "OK   runtimes"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestRuntimeNote: the configured runtime is said to be used when the
// daemon has it, and NOT installed when it has not.
func TestRuntimeNote(t *testing.T) {
	for _, tc := range []struct {
		have       []string
		want, note string
	}{
		{[]string{"runc", "runsc"}, "", ""},
		{[]string{"runc", "runsc"}, "runsc", " (using runsc)"},
		{[]string{"runc"}, "runsc", " (configured runtime runsc is NOT installed)"},
	} {
		if got := runtimeNote(tc.have, tc.want); got != tc.note {
			t.Errorf("runtimeNote(%v, %q) = %q; want %q", tc.have, tc.want, got, tc.note)
		}
	}
}
