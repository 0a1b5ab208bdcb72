package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
)

func TestReportString(t *testing.T) {
	r := Report{Destinations: []Destination{
		{Host: "api.example.com", Port: 443, Allowed: true, Conns: 2, BytesOut: 4 << 10, BytesIn: 10 << 10},
		{Host: "example.org", Port: 443, Reason: "not on the allowlist", Refused: 1},
		{Host: "files.example", Port: 443, Allowed: true, Conns: 1, BytesIn: 3 << 19, Reason: "cut: the run's download limit (1.5 MiB) was reached"},
		{Host: "2001:db8::1", Port: 80, Reason: "an IP address", Refused: 3},
	}, Dropped: 1}
	want := "allowed api.example.com:443 (2 connections, 14 KiB), refused example.org:443 (not on the allowlist), " +
		"allowed files.example:443 (1 connection, 1.5 MiB; cut: the run's download limit (1.5 MiB) was reached), " +
		"refused [2001:db8::1]:80 (an IP address; 3 times), 1 connection closed unread (over the limits, slow or malformed)"
	if got := r.String(); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if got := (Report{}).String(); got != "none" {
		t.Errorf("empty report %q", got)
	}
}

// TestReportStringBounded: a program that asks for thousands of names does
// not make the result's network line thousands of entries long.
func TestReportStringBounded(t *testing.T) {
	var r Report
	for i := range 4096 {
		r.Destinations = append(r.Destinations, Destination{Host: fmt.Sprintf("h%d.example", i), Port: 443,
			Allowed: i == 4000, Conns: 1, Reason: "not on the allowlist", Refused: 1})
	}
	s := r.String()
	if len(s) > 2000 || !strings.HasSuffix(s, "and 4076 more (1 allowed, 4075 refused)") {
		t.Errorf("%d bytes: ...%s", len(s), s[max(0, len(s)-200):])
	}
}

func TestTestResolver(t *testing.T) {
	r, err := ParseHostsFile(strings.NewReader("# test hosts\n127.0.0.1 API.example.com pypi.test\n::1 pypi.test # v6\n\n"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.LookupNetIP(context.Background(), "ip", "pypi.test.")
	if err != nil || len(got) != 2 {
		t.Errorf("pypi.test: %v %v", got, err)
	}
	got, err = r.LookupNetIP(context.Background(), "ip6", "pypi.test")
	if err != nil || len(got) != 1 || got[0] != netip.MustParseAddr("::1") {
		t.Errorf("pypi.test ip6: %v %v", got, err)
	}
	if got, err := r.LookupNetIP(context.Background(), "ip", "api.EXAMPLE.com"); err != nil || len(got) != 1 {
		t.Errorf("api.example.com: %v %v", got, err)
	}
	var dnsErr *net.DNSError
	if _, err := r.LookupNetIP(context.Background(), "ip", "other.test"); !errors.As(err, &dnsErr) || !dnsErr.IsNotFound {
		t.Errorf("other.test: %v, want not found", err)
	}
	s := StaticResolver{"API.example.com.": netip.MustParseAddr("127.0.0.1")}
	if got, err := s.LookupNetIP(context.Background(), "ip", "api.example.com"); err != nil || len(got) != 1 {
		t.Errorf("static api.example.com: %v %v", got, err)
	}
	if _, err := s.LookupNetIP(context.Background(), "ip6", "api.example.com"); !errors.As(err, &dnsErr) {
		t.Errorf("static api.example.com ip6: %v, want not found", err)
	}
	for _, bad := range []string{"127.0.0.1\n", "nonsense name\n", "127.0.0.1 bad_name\n"} {
		if _, err := ParseHostsFile(strings.NewReader(bad)); err == nil {
			t.Errorf("ParseHostsFile(%q) succeeded", bad)
		}
	}
}
