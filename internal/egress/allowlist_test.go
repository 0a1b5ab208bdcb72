package egress

import (
	"strings"
	"testing"
)

func TestParseAllowlist(t *testing.T) {
	a, err := ParseAllowlist([]string{"API.Example.com.", "*.pypi.org", "files.pythonhosted.org:8443",
		"bücher.example", "[2001:db8::1]:443", " 203.0.113.7 "})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := a.String(), "*.pypi.org,203.0.113.7,[2001:db8::1]:443,api.example.com,files.pythonhosted.org:8443,xn--bcher-kva.example"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	cases := []struct {
		host string
		port int
		want bool
	}{
		{"api.example.com", 443, true},
		{"API.EXAMPLE.COM.", 80, true},
		{"api.example.com", 22, false},    // no port: the web only
		{"x.api.example.com", 443, false}, // exact entries do not cover subdomains
		{"pypi.org", 443, false},          // a wildcard does not cover its apex
		{"a.b.pypi.org", 443, true},       // any depth
		{"evilpypi.org", 443, false},      // a suffix on a label boundary only
		{"files.pythonhosted.org", 443, false},
		{"files.pythonhosted.org", 8443, true},
		{"BÜCHER.example", 443, true}, // IDNA: case-folded Unicode matches the xn-- entry
		{"xn--bcher-kva.example", 80, true},
		{"[2001:db8::1]", 443, true},
		{"2001:db8::1", 443, true},
		{"203.0.113.7", 80, true},
		{"::ffff:203.0.113.7", 80, true},
		{"example.com", 443, false},
		{"api.example.com\x00.evil", 443, false},
		{"", 443, false},
	}
	for _, c := range cases {
		if got := a.Allows(c.host, c.port); got != c.want {
			t.Errorf("Allows(%q, %d) = %v, want %v", c.host, c.port, got, c.want)
		}
	}
	var zero Allowlist
	if !zero.Empty() || zero.Allows("api.example.com", 443) || a.Empty() {
		t.Errorf("Empty: zero %v, parsed %v", zero.Empty(), a.Empty())
	}
}

func TestParseAllowlistRejects(t *testing.T) {
	for _, e := range []string{"", "*", "*.com", "https://api.example.com", "api.example.com/path",
		"user@api.example.com", "api.example.com:0", "api.example.com:65536", "api.example.com:x",
		"2001:db8::1:443", "under_score.example.com", "-bad.example.com", "a..b", "127.1", "0x7f.1",
		"2130706433", "*.example.com:+80", "00\x800000000000.example", strings.Repeat("a", 64) + ".com", "[::1"} {
		if _, err := ParseAllowlist([]string{e}); err == nil {
			t.Errorf("ParseAllowlist(%q) succeeded, want an error", e)
		}
	}
}
