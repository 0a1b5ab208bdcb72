package quotafs

import "testing"

func TestParseMode(t *testing.T) {
	for in, want := range map[string]Mode{"": Auto, "auto": Auto, " Filesystem ": Filesystem, "meter": Meter} {
		if got, err := ParseMode(in); err != nil || got != want {
			t.Errorf("ParseMode(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseMode("quota"); err == nil {
		t.Error("ParseMode accepted an unknown mode")
	}
}
