package egress

import (
	"net"
	"net/netip"
)

// special is a range a program may not reach unless the operator names it.
type special struct {
	prefix netip.Prefix
	what   string
}

func mustPrefixes(what string, ss ...string) []special {
	out := make([]special, len(ss))
	for i, s := range ss {
		out[i] = special{netip.MustParsePrefix(s), what}
	}
	return out
}

// refusedRanges lists IPv4 and IPv6 special-purpose ranges (IANA registries),
// most specific first. IPv4-mapped addresses are unmapped before the check;
// NAT64 and 6to4 addresses are checked by the IPv4 address they embed.
var refusedRanges = concat(
	mustPrefixes("a loopback address", "127.0.0.0/8", "::1/128"),
	mustPrefixes("a link-local address (cloud metadata)", "169.254.169.254/32", "fd00:ec2::254/128"),
	mustPrefixes("a link-local address", "169.254.0.0/16", "fe80::/10"),
	mustPrefixes("a private address", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7"),
	mustPrefixes("a shared (CGNAT) address", "100.64.0.0/10"),
	mustPrefixes("an unspecified address", "0.0.0.0/8", "::/128"),
	mustPrefixes("a multicast address", "224.0.0.0/4", "ff00::/8"),
	mustPrefixes("a reserved address", "240.0.0.0/4", "192.0.0.0/24", "198.18.0.0/15",
		"192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24", "192.88.99.0/24",
		"::/96", "100::/64", "2001::/23", "2001:db8::/32", "fec0::/10", "64:ff9b:1::/48", "5f00::/16", "3fff::/20"),
)

func concat(parts ...[]special) []special {
	var out []special
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

var (
	nat64  = netip.MustParsePrefix("64:ff9b::/96")
	sixTo4 = netip.MustParsePrefix("2002::/16")
)

// embedded returns the IPv4 address inside a NAT64 or 6to4 address.
func embedded(a netip.Addr) (netip.Addr, bool) {
	b := a.As16()
	switch {
	case nat64.Contains(a):
		return netip.AddrFrom4([4]byte(b[12:16])), true
	case sixTo4.Contains(a):
		return netip.AddrFrom4([4]byte(b[2:6])), true
	}
	return netip.Addr{}, false
}

// classify returns why a is refused, or "" when it is an ordinary public
// address. own lists the host's interface addresses.
func classify(a netip.Addr, own []netip.Addr) string {
	a = a.WithZone("").Unmap()
	for _, o := range own {
		if o == a {
			return "this host's own address"
		}
	}
	for _, s := range refusedRanges {
		if s.prefix.Contains(a) {
			return s.what
		}
	}
	if v4, ok := embedded(a); ok {
		if why := classify(v4, own); why != "" {
			return why + " (embedded in " + a.String() + ")"
		}
	}
	return ""
}

// exempt reports whether the operator named a explicitly.
func exempt(a netip.Addr, allow []netip.Prefix) bool {
	a = a.WithZone("").Unmap()
	for _, p := range allow {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// interfaceAddrs returns the host's own addresses but loopback ones (which
// classify names as such), read each time: docker and VPNs add interfaces
// while pybox runs. An error yields none, and the range checks still apply.
func interfaceAddrs() []netip.Addr {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	out := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok && !ip.Unmap().IsLoopback() {
				out = append(out, ip.Unmap())
			}
		}
	}
	return out
}
