package serve

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Stdio serves srv on stdin and stdout (the client's pipes) through the
// stdio guard. The client going away, by ending stdin or by no longer
// reading stdout for stall, calls gone at once, before the SDK finishes
// the calls in flight; a stalled client makes Stdio return ErrStalled
// without waiting for the writes that will never end.
func Stdio(ctx context.Context, srv *mcp.Server, stdin io.Reader, stdout io.Writer, stall time.Duration, log *slog.Logger, gone func()) error {
	out := &lockedWriter{w: stdout}
	pr, pw := io.Pipe()
	guard := &stdioGuard{in: stdin, out: out, pipe: pw, log: log, onEOF: gone}
	done := make(chan struct{})
	go func() {
		defer close(done)
		guard.run()
	}()
	quit := make(chan struct{})
	defer close(quit)
	served := make(chan error, 1)
	go func() { served <- srv.Run(ctx, &mcp.IOTransport{Reader: pr, Writer: out}) }()
	var err error
	select {
	case err = <-served:
	case <-watchStall(out, stall, quit):
		log.Error("the client stopped reading the server's output: stopping every run, removing the containers and exiting", "blocked_for", stall)
		gone()
		return fmt.Errorf("%w for %v", ErrStalled, stall)
	}
	pr.Close() // unblocks the guard if it is writing
	if c, ok := stdin.(io.Closer); ok {
		c.Close() // unblocks it if it is reading (a pipe; a terminal may not wake)
	}
	select {
	case <-done:
	case <-time.After(2 * time.Second): // a terminal read that never wakes dies with the process
	}
	return err
}
