package app

import (
	"strings"
	"testing"

	"github.com/pybox-dev/pybox/internal/egress"
)

// TestEgressLimits: the limit settings become the proxy's Limits (unset:
// its defaults), and a bad value is refused naming its variable.
func TestEgressLimits(t *testing.T) {
	c := Config{EgressAllow: "api.example.com", EgressOut: "10m", EgressIn: "1g", EgressConns: 8, EgressTotal: 100}
	cfg, err := c.egress()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := cfg.Limits, (egress.Limits{BytesOut: 10 << 20, BytesIn: 1 << 30, Concurrent: 8, Total: 100}); got != want {
		t.Errorf("limits %+v, want %+v", got, want)
	}
	if cfg, err := (&Config{}).egress(); err != nil || cfg.Limits != (egress.Limits{}) {
		t.Errorf("unset limits: %+v, %v; want the proxy's defaults (zero)", cfg.Limits, err)
	}
	for _, c := range []struct {
		edit func(*Config)
		want string
	}{
		{func(c *Config) { c.EgressOut = "lots" }, "PYBOX_EGRESS_MAX_OUT"},
		{func(c *Config) { c.EgressIn = "0" }, "PYBOX_EGRESS_MAX_IN"},
		{func(c *Config) { c.EgressConns = -1 }, "PYBOX_EGRESS_CONNECTIONS"},
		{func(c *Config) { c.EgressTotal = 7 }, "PYBOX_EGRESS_TOTAL_CONNECTIONS"},
	} {
		bad := Config{EgressOut: "1g", EgressIn: "4g", EgressConns: 8, EgressTotal: 100}
		c.edit(&bad)
		if _, err := bad.egress(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error naming %s", bad, err, c.want)
		}
	}
}
