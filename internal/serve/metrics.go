package serve

import (
	"github.com/pybox-dev/pybox/internal/egress"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pybox-dev/pybox/internal/app"
	"github.com/pybox-dev/pybox/sandbox"
)

// metrics are what `pybox serve --http` exports on /metrics, per tenant
// where it matters. The Prometheus client library keeps them: it is the
// format's reference implementation, and its registry, histograms and
// exposition are exactly what we would otherwise write.
type metrics struct {
	reg      *prometheus.Registry
	runs     *prometheus.CounterVec   // tenant, outcome
	latency  *prometheus.HistogramVec // tenant, path (warm, cold, session)
	misses   *prometheus.CounterVec   // tenant: stateless runs that found no warm container
	installs *prometheus.CounterVec   // tenant, result (new, cached, failed)
	refused  *prometheus.CounterVec   // tenant, reason: calls refused by a tenant quota
	requests *prometheus.CounterVec   // code: HTTP requests by status
	egress   *prometheus.CounterVec   // tenant, verdict: connections through the egress proxy
	egressB  *prometheus.CounterVec   // tenant, direction: bytes through the egress proxy
}

func newMetrics(pools func() map[string]int) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "pybox_runs_total",
			Help: "Programs run, by tenant and outcome (ok, exit, timeout, oom, resource_limit, quota, failed: pybox or Docker failed)."}, []string{"tenant", "outcome"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "pybox_run_duration_seconds",
			Help:    "Wall-clock time of a program's run, by tenant and path (warm: a warm-pool container; cold: a new one; session).",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}}, []string{"tenant", "path"}),
		misses: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "pybox_pool_misses_total",
			Help: "Stateless runs that found no ready warm-pool container and started one."}, []string{"tenant"}),
		installs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "pybox_installs_total",
			Help: "install_dependencies calls by result: new (a layer built), cached (an existing layer), failed."}, []string{"tenant", "result"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "pybox_refused_calls_total",
			Help: "Tool calls refused by a tenant quota, by reason (calls_per_minute; mcp_sessions: a new MCP session past --max-mcp-sessions)."}, []string{"tenant", "reason"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "pybox_http_requests_total",
			Help: "HTTP requests by status code."}, []string{"code"}),
		egress: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "pybox_egress_connections_total",
			Help: "Connections programs made through the egress proxy, by tenant and verdict (allowed; refused; dropped: closed before naming a destination, over the limits or malformed)."}, []string{"tenant", "verdict"}),
		egressB: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "pybox_egress_bytes_total",
			Help: "Bytes through the egress proxy, by tenant and direction (in: to the program; out: from it)."}, []string{"tenant", "direction"}),
	}
	m.reg.MustRegister(m.runs, m.latency, m.misses, m.installs, m.refused, m.requests, m.egress, m.egressB, poolCollector{pools})
	return m
}

// poolCollector reports each tenant's ready warm containers when scraped.
type poolCollector struct{ pools func() map[string]int }

var poolDesc = prometheus.NewDesc("pybox_pool_ready", "Ready warm-pool containers, by tenant.", []string{"tenant"}, nil)

func (p poolCollector) Describe(ch chan<- *prometheus.Desc) { ch <- poolDesc }

func (p poolCollector) Collect(ch chan<- prometheus.Metric) {
	for tenant, n := range p.pools() {
		ch <- prometheus.MustNewConstMetric(poolDesc, prometheus.GaugeValue, float64(n), tenant)
	}
}

// tenant is m as the observer of one tenant's app.
func (m *metrics) tenant(name string) app.Observer { return tenantMetrics{m, name} }

// tenantMetrics counts one tenant's runs and installs (app.Observer).
type tenantMetrics struct {
	m      *metrics
	tenant string
}

// Run records a run of the tenant's.
func (o tenantMetrics) Run(path string, res sandbox.Result, err error) {
	m := o.m
	outcome := "ok"
	switch {
	case err != nil:
		outcome = "failed"
	case res.TimedOut:
		outcome = "timeout"
	case res.OOMKilled:
		outcome = "oom"
	case res.ResourceKilled:
		outcome = "resource_limit"
	case res.QuotaExceeded:
		outcome = "quota"
	case res.ExitCode != 0:
		outcome = "exit"
	}
	m.runs.WithLabelValues(o.tenant, outcome).Inc()
	if err == nil {
		m.latency.WithLabelValues(o.tenant, path).Observe(res.Duration.Seconds())
	}
	if path == "cold" {
		m.misses.WithLabelValues(o.tenant).Inc()
	}
	m.observeEgress(o.tenant, res.Egress)
}

// Install records an install's result (new, cached, failed).
func (o tenantMetrics) Install(result string) { o.m.installs.WithLabelValues(o.tenant, result).Inc() }

// observeEgress counts what a run's egress proxy saw.
func (m *metrics) observeEgress(tenant string, r egress.Report) {
	for _, d := range r.Destinations {
		m.egress.WithLabelValues(tenant, "allowed").Add(float64(d.Conns))
		m.egress.WithLabelValues(tenant, "refused").Add(float64(d.Refused))
		m.egressB.WithLabelValues(tenant, "in").Add(float64(d.BytesIn))
		m.egressB.WithLabelValues(tenant, "out").Add(float64(d.BytesOut))
	}
	if r.Dropped > 0 {
		m.egress.WithLabelValues(tenant, "dropped").Add(float64(r.Dropped))
	}
}

// sinceMS is a duration in milliseconds, for access logs.
func sinceMS(t time.Time) int64 { return time.Since(t).Milliseconds() }
