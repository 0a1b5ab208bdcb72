package tools

import (
	"bytes"
	"testing"
)

// TestProgressBufferCap: output past the notification cap is dropped and
// flagged, whichever stream fills it; a "[stderr] " marker landing right
// at the cap must not make the next slice bound negative (a panic there
// runs on the sandbox's copy goroutine and takes the server down).
func TestProgressBufferCap(t *testing.T) {
	tests := []struct {
		name   string
		fill   int
		stream string
		chunk  string
	}{
		{"stderr marker crosses the cap", maxProgressText - 3, "stderr", "boom"},
		{"stdout chunk crosses the cap", maxProgressText - 3, "stdout", "boom"},
		{"stderr after a full buffer", maxProgressText, "stderr", "boom"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &progress{}
			p.onOutput("stdout", bytes.Repeat([]byte("x"), tt.fill))
			p.onOutput(tt.stream, []byte(tt.chunk))
			if got := p.pending.Len(); got > maxProgressText {
				t.Errorf("pending holds %d bytes; want at most %d", got, maxProgressText)
			}
			if !p.dropped {
				t.Errorf("output was cut but not flagged as dropped")
			}
		})
	}
}
