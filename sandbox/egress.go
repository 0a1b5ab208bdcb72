package sandbox

import (
	"log/slog"

	"github.com/pybox-dev/pybox/internal/egress"
	"github.com/pybox-dev/pybox/internal/egressdir"
)

// egress: p's run has a network (a proxy of its own).
func (p Program) egress() bool { return p.Egress != nil && !p.Egress.Allow.Empty() }

// egressRun is a run's proxy; nil (no allowlist) does nothing.
type egressRun struct{ run *egressdir.Run }

// startEgress starts the proxy of a run with cfg's allowlist, in a fresh
// private folder of the sandbox's (RunsDir, else the temporary folder);
// nil, nil for no allowlist. The folder and the proxy are the run's
// alone, and end with it (close).
func (s *Sandbox) startEgress(cfg *egress.Config) (*egressRun, error) {
	if cfg == nil || cfg.Allow.Empty() {
		return nil, nil
	}
	if b, ok := s.eng.(noEgress); ok {
		return nil, b.NoEgress()
	}
	r, err := egressdir.Start(s.runsDir, *cfg)
	if err != nil {
		return nil, err
	}
	return &egressRun{run: r}, nil
}

// dir is the host folder to mount; "" = none.
func (e *egressRun) dir() string {
	if e == nil {
		return ""
	}
	return e.run.Dir()
}

// close stops the proxy and waits for its connections. Idempotent.
func (e *egressRun) close(log *slog.Logger) egress.Report {
	if e == nil {
		return egress.Report{}
	}
	rep, err := e.run.Close()
	if err != nil {
		log.Warn("egress proxy", "err", err)
	}
	return rep
}

// into closes the proxy (the run is over) and puts its report in res.
func (e *egressRun) into(res *Result, log *slog.Logger) {
	if e == nil {
		return
	}
	res.Egress = e.close(log)
	res.Network = res.Egress.String()
}

// withEgress mounts the egress folder dir ("" = none) and tells the
// runner where the proxy's socket is.
func (p *Plan) withEgress(dir string) {
	if dir == "" {
		return
	}
	p.Egress = dir
	p.Env[egressdir.Env] = egressdir.SocketPath()
}
