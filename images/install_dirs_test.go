package images

import (
	"bytes"
	"strings"
	"testing"
)

// TestHeadWriterSplitsTheFirstLine: however the output is chunked, the
// first line is kept apart and everything after it goes on; a first line
// longer than the limit is cut and what follows still goes on.
func TestHeadWriterSplitsTheFirstLine(t *testing.T) {
	const out = "PYBOX-PACKAGE-DIRS {}\nLooking in links\nInstalled\n"
	for _, size := range []int{1, 3, 7, len(out)} {
		var rest bytes.Buffer
		w := &headWriter{max: 64, rest: &rest}
		for p := out; p != ""; p = p[min(size, len(p)):] {
			if n, err := w.Write([]byte(p[:min(size, len(p))])); err != nil || n != min(size, len(p)) {
				t.Fatalf("Write: %d, %v", n, err)
			}
		}
		if w.first() != "PYBOX-PACKAGE-DIRS {}" || rest.String() != "Looking in links\nInstalled\n" {
			t.Errorf("chunks of %d: first %q rest %q", size, w.first(), rest.String())
		}
	}
	var rest bytes.Buffer
	w := &headWriter{max: 4, rest: &rest}
	if _, err := w.Write([]byte("abcdefg\nrest")); err != nil {
		t.Fatal(err)
	}
	if w.first() != "abcd" || rest.String() != "efg\nrest" {
		t.Errorf("long first line: first %q rest %q", w.first(), rest.String())
	}
	if w := (&headWriter{max: 64, rest: &rest}); w.first() != "" {
		t.Errorf("first line before any newline: %q", w.first())
	}
}

// TestParseDirsRefusesOddReports: a report must come first and name clean
// absolute directories other than /.
func TestParseDirsRefusesOddReports(t *testing.T) {
	good := `{"uid":10002,"prefix":"/opt/venv","purelib":"/opt/venv/lib/python3.11/site-packages",` +
		`"platlib":"/opt/venv/lib/python3.11/site-packages","scripts":"/opt/venv/bin","data":"/opt/venv","unwritable":[]}`
	if d, err := parseDirs(dirsMarker + good); err != nil || d.UID != 10002 || d.Scripts != "/opt/venv/bin" {
		t.Errorf("good report: %+v, %v", d, err)
	}
	for _, bad := range []string{
		"", "Looking in links: /tmp/wheelhouse", dirsMarker + "{",
		dirsMarker + strings.Replace(good, `"data":"/opt/venv"`, `"data":"/"`, 1),
		dirsMarker + strings.Replace(good, `"scripts":"/opt/venv/bin"`, `"scripts":"bin"`, 1),
		dirsMarker + strings.Replace(good, `"scripts":"/opt/venv/bin"`, `"scripts":"/opt/venv/../bin"`, 1),
		dirsMarker + strings.Replace(good, `"platlib":"/opt/venv/lib/python3.11/site-packages"`, `"platlib":""`, 1),
	} {
		if _, err := parseDirs(bad); err == nil {
			t.Errorf("report %q accepted", bad)
		}
	}
}
