//go:build !windows

package images

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
)

// tryLock takes an exclusive flock on f without waiting; held is true when
// another process has it.
func tryLock(f *os.File) (held bool, err error) {
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return true, nil
	}
	return false, err
}

// ownGroup starts cmd in a process group of its own, signalled whole
// (SIGTERM) when its context is cancelled.
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
}

// killGroup kills what is left of cmd's process group. ESRCH, the usual
// answer, means nothing was left.
func killGroup(cmd *exec.Cmd) { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
