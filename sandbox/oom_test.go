package sandbox_test

import (
	"context"
	"testing"

	"github.com/pybox-dev/pybox/internal/engine"
	"github.com/pybox-dev/pybox/internal/testenv"
	"github.com/pybox-dev/pybox/sandbox"
)

// forgetfulBackend is a real backend whose daemon never knows of an OOM
// kill: what a busy Docker daemon answers once its short ring of recent
// events (256) has moved past the kill of a container it has removed
// already (AutoRemove), or when its own OOM event comes later than pybox
// waits for it.
type forgetfulBackend struct{ sandbox.Backend }

func (b forgetfulBackend) Start(ctx context.Context, spec engine.Spec) (sandbox.Attachment, error) {
	a, err := b.Backend.Start(ctx, spec)
	if err != nil {
		return nil, err
	}
	return forgetfulAttachment{a}, nil
}

type forgetfulAttachment struct{ sandbox.Attachment }

func (a forgetfulAttachment) Exit() engine.Exit {
	x := a.Attachment.Exit()
	x.OOMKilled = false
	return x
}

// TestOOMKillKnownWithoutTheDaemon: a program the kernel's OOM killer
// ends is reported out of memory (not as a plain exit 137) without the
// daemon's word, in a pooled run, an unpooled one and a session: the
// runner reads its cgroup's count of OOM kills when its worker dies by
// SIGKILL. (The flake it ends: an OOM reported as exit 137 on a busy
// daemon.) A program that kills itself with SIGKILL is no OOM kill.
func TestOOMKillKnownWithoutTheDaemon(t *testing.T) {
	eng := testenv.Docker(t)
	const hog = "x = bytearray(400 << 20); x[::4096] = b'x' * len(x[::4096])\nprint('survived')"
	const suicide = "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)"
	for _, pool := range []int{1, -1} {
		sb, _ := newSandbox(t, sandbox.Config{Backend: forgetfulBackend{sandbox.Docker(eng)}, WarmPool: pool,
			Limits: sandbox.Limits{Memory: 128 << 20}})
		for _, c := range []struct {
			code string
			oom  bool
		}{{hog, true}, {suicide, false}} {
			res, err := runCode(t.Context(), sb, c.code)
			if err != nil || res.ExitCode != 137 || res.OOMKilled != c.oom {
				t.Errorf("pool %d, %.30q: exit %d, out of memory %v, err %v, stderr %q; want exit 137, out of memory %v",
					pool, c.code, res.ExitCode, res.OOMKilled, err, res.Stderr, c.oom)
			}
		}
		if pool < 0 {
			continue
		}
		for _, c := range []struct {
			code string
			oom  bool
		}{{hog, true}, {suicide, false}} {
			if res, err := sb.RunInSession(t.Context(), "s", sandbox.SessionProgram{Code: "n = 1"}); err != nil || res.ExitCode != 0 {
				t.Fatalf("session: exit %d, err %v, stderr %q", res.ExitCode, err, res.Stderr)
			}
			res, err := sb.RunInSession(t.Context(), "s", sandbox.SessionProgram{Code: c.code})
			if err != nil || res.ExitCode != 137 || res.OOMKilled != c.oom || !res.SessionLost {
				t.Errorf("session, %.30q: exit %d, out of memory %v, session lost %v, err %v, stderr %q; want exit 137, out of memory %v, the session lost",
					c.code, res.ExitCode, res.OOMKilled, res.SessionLost, err, res.Stderr, c.oom)
			}
		}
	}
}
