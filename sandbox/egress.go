package sandbox

import (
	"errors"
	"log/slog"
	"strconv"
	"sync"

	"github.com/pybox-dev/pybox/internal/egress"
	"github.com/pybox-dev/pybox/internal/egressdir"
	"github.com/pybox-dev/pybox/internal/egressmux"
)

// egress: p's run has a network (a proxy of its own).
func (p Program) egress() bool { return p.Egress != nil && !p.Egress.Allow.Empty() }

// egressRun is a run's (or a session's) proxy; nil (no allowlist) does
// nothing. Its proxy listens on a unix socket in a folder mounted into
// the container, or, over the channel (Kubernetes, Config.EgressChannel),
// on the streams the runner sends over its stdin and stdout
// (internal/egressmux): then run is made by bind, once the container's
// channel exists.
type egressRun struct {
	run     *egressdir.Run
	channel bool
	pending *egress.Config // over the channel: served by bind (a session's)
	mux     *egressmux.Mux
	mu      sync.Mutex
	last    egress.Report // a session's report at the end of its previous turn
}

// overChannel: the sandbox's runs reach their proxy over the runner's
// channel instead of a mounted socket.
func (s *Sandbox) overChannel() bool {
	b, ok := s.eng.(channelEgress)
	return s.cfg.EgressChannel || ok && b.EgressOverChannel()
}

// startEgress starts the proxy of a run with cfg's allowlist, in a fresh
// private folder of the sandbox's (RunsDir, else the temporary folder);
// nil, nil for no allowlist. The folder and the proxy are the run's
// alone, and end with it (close). Over the channel, the proxy starts when
// bind gives it the container's channel.
func (s *Sandbox) startEgress(cfg *egress.Config) (*egressRun, error) {
	if cfg == nil || cfg.Allow.Empty() {
		return nil, nil
	}
	if s.overChannel() {
		return &egressRun{channel: true, pending: cfg}, nil
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
	if s.overChannel() {
		return &egressRun{channel: true}, nil
	}
	r, err := egressdir.Listen(s.runsDir)
	if err != nil {
		return nil, err
	}
	return &egressRun{run: r}, nil
}

// bind gives a channel egressRun its container's channel: the Mux that
// takes the runner's streams, as the listener of the run's proxy (served
// now for a session's, at serve for a run's). Nothing else does anything.
func (e *egressRun) bind(c *conn) error {
	if e == nil || !e.channel {
		return nil
	}
	m, err := egressmux.New(egressmux.Config{Send: func(msg []byte) error { return c.send(netMessage(msg)) }})
	if err != nil {
		return err
	}
	e.mux, e.run, c.mux = m, egressdir.Over(m), m
	if e.pending != nil {
		return e.run.Serve(*e.pending)
	}
	return nil
}

// serve starts the proxy with cfg (a run took the container).
func (e *egressRun) serve(cfg *egress.Config) error {
	if e == nil || e.run == nil {
		return errors.New("sandbox: a run with an allowlist got a container without the egress folder")
	}
	return e.run.Serve(*cfg)
}

// dir is the host folder to mount; "" = none.
func (e *egressRun) dir() string {
	if e == nil || e.channel {
		return ""
	}
	return e.run.Dir()
}

// close stops the proxy and waits for its connections. Idempotent.
func (e *egressRun) close(log *slog.Logger) egress.Report {
	if e == nil || e.run == nil {
		return egress.Report{}
	}
	if e.mux != nil {
		e.mux.Close() // wakes every stream waiting for the runner
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

// withEgress mounts e's egress folder and tells the runner where the
// proxy's socket is, or that it is over the channel; nothing for nil.
func (p *Plan) withEgress(e *egressRun) {
	switch {
	case e == nil:
	case e.channel:
		p.Env[egressdir.Env] = egressdir.Channel
	default:
		p.Egress = e.dir()
		p.Env[egressdir.Env] = egressdir.SocketPath()
	}
}
