//go:build !windows

package downstream

import (
	"os"
	"syscall"
)

// resume continues p if it is stopped (SIGSTOP, a debugger): a stopped
// server reads neither the end of its stdin nor SIGTERM until it runs
// again, so its stop would otherwise wait for SIGKILL.
func resume(p *os.Process) {
	_ = p.Signal(syscall.SIGCONT) // it may have exited already
}
