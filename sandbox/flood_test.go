package sandbox_test

import (
	"context"
	"io"
	"sync/atomic"
	"testing"

	"github.com/pybox-dev/pybox/internal/engine"
	"github.com/pybox-dev/pybox/internal/testenv"
	"github.com/pybox-dev/pybox/sandbox"
)

// countingBackend is a real backend that counts the bytes the server
// reads from its containers' streams.
type countingBackend struct {
	sandbox.Backend
	read atomic.Int64
}

func (b *countingBackend) Start(ctx context.Context, spec engine.Spec) (sandbox.Attachment, error) {
	a, err := b.Backend.Start(ctx, spec)
	if err != nil {
		return nil, err
	}
	return countingAttachment{a, &b.read}, nil
}

type countingAttachment struct {
	sandbox.Attachment
	n *atomic.Int64
}

func (a countingAttachment) Output() io.Reader { return countingReader{a.Attachment.Output(), a.n} }

type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (r countingReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.n.Add(int64(n))
	return n, err
}

// TestOutputPastCapStaysInContainer: a program that floods stdout and
// stderr far past the output cap costs the host only the cap: the runner
// frames the first cap bytes of each stream, reads and counts the rest
// in the container, and the result says truncated and how much was
// dropped. Under each runtime, in a run and in a session turn.
func TestOutputPastCapStaysInContainer(t *testing.T) {
	const capBytes = 64 << 10
	const flood = 48 << 20 // per stream
	code := "import os\nb = b'x' * (1 << 20)\nfor _ in range(48):\n    os.write(1, b)\n    os.write(2, b)\nprint('end')\n"
	eng := testenv.Docker(t)
	for _, rt := range testenv.Runtimes(t, eng) {
		t.Run(testenv.RuntimeName(rt), func(t *testing.T) {
			cb := &countingBackend{Backend: sandbox.Docker(eng)}
			sb, _ := newSandbox(t, sandbox.Config{Backend: cb, Runtime: rt, WarmPool: -1,
				Limits: sandbox.Limits{OutputBytes: capBytes}})
			check := func(what string, res sandbox.Result, err error) {
				t.Helper()
				read := cb.read.Swap(0)
				t.Logf("%s: the server read %d bytes for %d written; %d dropped in the container", what, read, 2*flood+4, res.DroppedBytes)
				if err != nil || res.ExitCode != 0 || !res.Truncated || len(res.Stdout) != capBytes || len(res.Stderr) != capBytes {
					t.Errorf("%s: exit %d truncated %v stdout %d stderr %d bytes, err %v; want exit 0, truncated, %d bytes each",
						what, res.ExitCode, res.Truncated, len(res.Stdout), len(res.Stderr), err, capBytes)
				}
				if want := int64(2*flood + 4 - 2*(capBytes+1)); res.DroppedBytes != want { // the runner sends a byte past the cap: the sign of truncation
					t.Errorf("%s: %d bytes reported dropped; want %d", what, res.DroppedBytes, want)
				}
				if read > 4*capBytes { // the cap of each stream, frame headers, ready and done
					t.Errorf("%s: the server read %d bytes from the container's stream; want at most %d", what, read, 4*capBytes)
				}
			}
			res, err := runCode(t.Context(), sb, code)
			check("run", res, err)
			res, err = sb.RunInSession(t.Context(), "flood", sandbox.SessionProgram{Code: code})
			check("session", res, err)
			res, err = sb.RunInSession(t.Context(), "flood", sandbox.SessionProgram{Code: code})
			check("second session turn (the cap is per turn)", res, err)
		})
	}
}
