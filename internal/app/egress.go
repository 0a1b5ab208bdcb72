package app

import (
	"fmt"
	"net/netip"
	"os"
	"strings"

	"github.com/docker/go-units"

	"github.com/pybox-dev/pybox/internal/egress"
)

// egress is the egress proxy's configuration for programs: the allowlist
// (empty: no network at all), the private addresses the operator allows
// and, for tests only, a static resolver.
func (c *Config) egress() (*egress.Config, error) {
	allow, err := egress.ParseAllowlist(SplitList(c.EgressAllow))
	if err != nil {
		return nil, fmt.Errorf("PYBOX_EGRESS_ALLOW: %w", err)
	}
	limits, err := c.egressLimits()
	if err != nil {
		return nil, err
	}
	cfg := &egress.Config{Allow: allow, Limits: limits}
	for _, a := range SplitList(c.EgressAddrs) {
		p, err := parsePrefix(a)
		if err != nil {
			return nil, fmt.Errorf("PYBOX_EGRESS_ALLOW_ADDRS: %w", err)
		}
		cfg.AllowAddrs = append(cfg.AllowAddrs, p)
	}
	if c.EgressTest != "" {
		r, err := testResolver(c.EgressTest)
		if err != nil {
			return nil, fmt.Errorf("PYBOX_EGRESS_TEST_HOSTS: %w", err)
		}
		cfg.Resolver = r
	}
	return cfg, nil
}

// egressLimits are a run's proxy limits from the settings; an unset one
// (empty, 0) is the proxy's default.
func (c *Config) egressLimits() (egress.Limits, error) {
	out, err := sizeOrDefault(c.EgressOut)
	if err != nil {
		return egress.Limits{}, fmt.Errorf("PYBOX_EGRESS_MAX_OUT %q: must be a size such as 1g", c.EgressOut)
	}
	in, err := sizeOrDefault(c.EgressIn)
	if err != nil {
		return egress.Limits{}, fmt.Errorf("PYBOX_EGRESS_MAX_IN %q: must be a size such as 4g", c.EgressIn)
	}
	if c.EgressConns < 0 || c.EgressTotal < 0 || c.EgressTotal > 0 && c.EgressTotal < c.EgressConns {
		return egress.Limits{}, fmt.Errorf("PYBOX_EGRESS_CONNECTIONS (%d) and PYBOX_EGRESS_TOTAL_CONNECTIONS (%d) must be positive, the total at least the first", c.EgressConns, c.EgressTotal)
	}
	return egress.Limits{BytesOut: out, BytesIn: in, Concurrent: c.EgressConns, Total: c.EgressTotal}, nil
}

// sizeOrDefault reads a size; "" is 0 (the default).
func sizeOrDefault(v string) (int64, error) {
	if v == "" {
		return 0, nil
	}
	n, err := units.RAMInBytes(v)
	if err == nil && n < 1 {
		err = fmt.Errorf("%q is not positive", v)
	}
	return n, err
}

// parsePrefix reads an address (a /32 or /128) or a prefix.
func parsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		return netip.ParsePrefix(s)
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// testResolver reads "name=address,...": the names resolve to those
// addresses and nothing else resolves (tests only).
func testResolver(s string) (egress.Resolver, error) {
	table := map[string][]netip.Addr{}
	for _, e := range SplitList(s) {
		name, addr, ok := strings.Cut(e, "=")
		a, err := netip.ParseAddr(addr)
		if !ok || err != nil || name == "" {
			return nil, fmt.Errorf("%q: want name=address", e)
		}
		table[name] = append(table[name], a)
	}
	return egress.NewTestResolver(table)
}

// tenantEgress reads the per-tenant allowlists file (see --tenant-egress):
// "TENANT HOST,HOST..." per line, "TENANT -" for none; blank lines and #
// comments skipped. Every line must parse, and every list with it.
func tenantEgress(path string) (map[string]string, error) {
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tenant egress file: %w", err)
	}
	lists := map[string]string{}
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		tenant, list, ok := strings.Cut(line, " ")
		list = strings.TrimSpace(list)
		if list == "-" {
			list = ""
		}
		_, perr := egress.ParseAllowlist(SplitList(list))
		switch {
		case !ok || !TenantName.MatchString(tenant):
			return nil, fmt.Errorf("tenant egress file %s line %d: want \"TENANT HOST,HOST...\"", path, i+1)
		case perr != nil:
			return nil, fmt.Errorf("tenant egress file %s line %d: %w", path, i+1, perr)
		}
		lists[tenant] = list
	}
	return lists, nil
}
