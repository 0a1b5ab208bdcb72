package main

import "testing"

// TestEgressLimitSettings: the proxy's limits are read from their
// variables and flags (a flag wins), with the package's defaults;
// internal/app's TestEgressLimits maps them to the proxy.
func TestEgressLimitSettings(t *testing.T) {
	c, err := parseConfig(t, []string{"--egress-connections=8"}, map[string]string{"PYBOX_EGRESS_MAX_OUT": "10m",
		"PYBOX_EGRESS_MAX_IN": "1g", "PYBOX_EGRESS_TOTAL_CONNECTIONS": "100", "PYBOX_EGRESS_CONNECTIONS": "9"})
	if err != nil {
		t.Fatal(err)
	}
	if c.EgressOut != "10m" || c.EgressIn != "1g" || c.EgressConns != 8 || c.EgressTotal != 100 {
		t.Errorf("settings read as out %q in %q at once %d in all %d", c.EgressOut, c.EgressIn, c.EgressConns, c.EgressTotal)
	}
	c, err = parseConfig(t, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.EgressOut != "1g" || c.EgressIn != "4g" || c.EgressConns != 64 || c.EgressTotal != 4096 {
		t.Errorf("defaults: out %q in %q at once %d in all %d", c.EgressOut, c.EgressIn, c.EgressConns, c.EgressTotal)
	}
}
