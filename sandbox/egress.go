package sandbox

import (
	"errors"
	"log/slog"
	"strconv"
	"sync"

	"github.com/pybox-dev/pybox/internal/egress"
	"github.com/pybox-dev/pybox/internal/egressdir"
)

// egress: p's run has a network (a proxy of its own).
func (p Program) egress() bool { return p.Egress != nil && !p.Egress.Allow.Empty() }

// egressRun is a run's (or a session's) proxy; nil (no allowlist) does
// nothing.
type egressRun struct {
	run  *egressdir.Run
	mu   sync.Mutex
	last egress.Report // a session's report at the end of its previous turn
}

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

// listenEgress makes a container's egress folder with its socket
// listening, before the run is known (warm containers); serve starts the
// proxy when a run takes it. nil, nil when the sandbox's runs have no
// network.
func (s *Sandbox) listenEgress(p Program) (*egressRun, error) {
	if !p.egress() {
		return nil, nil
	}
	if b, ok := s.eng.(noEgress); ok {
		return nil, b.NoEgress()
	}
	r, err := egressdir.Listen(s.runsDir)
	if err != nil {
		return nil, err
	}
	return &egressRun{run: r}, nil
}

// serve starts the proxy with cfg (a run took the container).
func (e *egressRun) serve(cfg *egress.Config) error {
	if e == nil {
		return errors.New("sandbox: a run with an allowlist got a container without the egress folder")
	}
	return e.run.Serve(*cfg)
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

// turnInto puts what a session's proxy saw during the turn just ended in
// res: the report's growth since the previous turn.
func (e *egressRun) turnInto(res *Result) {
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.run.Report()
	res.Egress = since(now, e.last)
	res.Network = res.Egress.String()
	e.last = now
}

// since is what report now adds to before: the destinations whose counts
// grew, by how much.
func since(now, before egress.Report) egress.Report {
	old := map[string]egress.Destination{}
	for _, d := range before.Destinations {
		old[d.Host+":"+strconv.Itoa(d.Port)] = d
	}
	out := egress.Report{Dropped: now.Dropped - before.Dropped}
	for _, d := range now.Destinations {
		o := old[d.Host+":"+strconv.Itoa(d.Port)]
		d.Conns, d.Refused = d.Conns-o.Conns, d.Refused-o.Refused
		d.BytesIn, d.BytesOut = d.BytesIn-o.BytesIn, d.BytesOut-o.BytesOut
		if d.Conns > 0 || d.Refused > 0 || d.BytesIn > 0 || d.BytesOut > 0 {
			out.Destinations = append(out.Destinations, d)
		}
	}
	return out
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
