package egress

import (
	"net/netip"
	"strings"
	"testing"
)

func TestClassify(t *testing.T) {
	own := []netip.Addr{netip.MustParseAddr("198.51.100.9"), netip.MustParseAddr("2600:1f18::5")}
	cases := []struct{ addr, want string }{
		{"127.0.0.1", "loopback"},
		{"127.255.0.1", "loopback"},
		{"::1", "loopback"},
		{"::ffff:127.0.0.1", "loopback"},
		{"169.254.169.254", "cloud metadata"},
		{"fd00:ec2::254", "cloud metadata"},
		{"169.254.1.1", "link-local"},
		{"fe80::1%eth0", "link-local"},
		{"10.0.0.1", "private"},
		{"172.31.255.255", "private"},
		{"192.168.1.1", "private"},
		{"fd12::1", "private"},
		{"100.64.0.1", "shared (CGNAT)"},
		{"0.0.0.0", "unspecified"},
		{"0.1.2.3", "unspecified"},
		{"::", "unspecified"},
		{"224.0.0.1", "multicast"},
		{"ff02::1", "multicast"},
		{"255.255.255.255", "reserved"},
		{"64:ff9b::a9fe:a9fe", "cloud metadata"}, // NAT64 of 169.254.169.254
		{"2002:7f00:1::", "loopback"},            // 6to4 of 127.0.0.1
		{"::127.0.0.1", "reserved"},              // IPv4-compatible
		{"198.51.100.9", "this host's own address"},
		{"::ffff:198.51.100.9", "this host's own address"},
		{"2600:1f18::5", "this host's own address"},
		{"8.8.8.8", ""},
		{"2606:4700::1111", ""},
		{"64:ff9b::808:808", ""}, // NAT64 of a public address
	}
	for _, c := range cases {
		got := classify(netip.MustParseAddr(c.addr), own)
		if c.want == "" && got != "" || !strings.Contains(got, c.want) {
			t.Errorf("classify(%s) = %q, want %q", c.addr, got, c.want)
		}
	}
}

func TestExempt(t *testing.T) {
	allow := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24"), netip.MustParsePrefix("127.0.0.1/32")}
	for addr, want := range map[string]bool{"10.0.0.7": true, "::ffff:10.0.0.7": true, "10.0.1.7": false, "127.0.0.2": false, "127.0.0.1": true} {
		if got := exempt(netip.MustParseAddr(addr), allow); got != want {
			t.Errorf("exempt(%s) = %v, want %v", addr, got, want)
		}
	}
}
