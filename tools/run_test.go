package tools

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/pybox-dev/pybox/sandbox"
)

func TestTimeoutArgument(t *testing.T) {
	h := &handlers{cfg: Config{MaxTimeout: 60 * time.Second}}
	tests := []struct {
		in      float64
		want    time.Duration
		wantErr bool
	}{
		{0, 0, false},
		{1.5, 1500 * time.Millisecond, false},
		{600, 60 * time.Second, false},  // capped
		{1e10, 60 * time.Second, false}, // capped, not overflowed
		{-1, 0, true},
		{0.01, 0, true},
		{math.NaN(), 0, true},
		{math.Inf(1), 0, true},
	}
	for _, tt := range tests {
		got, err := h.timeout(tt.in)
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("timeout(%v) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestCheckCode(t *testing.T) {
	h := &handlers{cfg: Config{MaxCodeBytes: 10}}
	if err := h.checkCode("print(1)"); err != nil {
		t.Errorf("small code refused: %v", err)
	}
	if err := h.checkCode("print(12345)"); err == nil || !strings.Contains(err.Error(), "limit is 10 bytes") {
		t.Errorf("large code: %v", err)
	}
}

func TestSummary(t *testing.T) {
	tests := []struct {
		name string
		res  sandbox.Result
		want []string
	}{
		{"ok", sandbox.Result{Stdout: "hi\n"}, []string{"Exit status: 0", "--- stdout ---\nhi\n"}},
		{"timeout", sandbox.Result{TimedOut: true, Timeout: time.Second, Stdout: "part"}, []string{"timed out after 1s", "part\n"}},
		{"oom", sandbox.Result{OOMKilled: true, ExitCode: 137}, []string{"out of memory", "137"}},
		{"truncated", sandbox.Result{Stderr: "e", Truncated: true}, []string{"--- stderr ---\ne\n", "truncated"}},
	}
	for _, tt := range tests {
		got := summary(tt.res)
		for _, w := range tt.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: summary %q lacks %q", tt.name, got, w)
			}
		}
	}
}
