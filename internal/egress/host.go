package egress

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"
)

// lookup is the IDNA profile for names: UTS #46 mapping for lookup
// (case folding, width and compatibility mapping), non-transitional, STD3
// rules (letters, digits and hyphens only), the Bidi rule, and DNS lengths.
var lookup = idna.New(
	idna.MapForLookup(),
	idna.Transitional(false),
	idna.BidiRule(),
	idna.VerifyDNSLength(true),
)

// normalizeName returns the canonical ASCII form of a host name: mapped and
// punycoded by IDNA, lower case, without one trailing dot.
func normalizeName(s string) (string, error) {
	if s == "" {
		return "", errors.New("empty host name")
	}
	s = strings.TrimSuffix(s, ".")
	if !utf8.ValidString(s) {
		return "", fmt.Errorf("invalid host name %s: not UTF-8", quote(s))
	}
	a, err := lookup.ToASCII(s)
	if err == nil {
		_, err = lookup.ToUnicode(a) // the xn-- labels made must be valid too: one name, one form
	}
	if err != nil {
		return "", fmt.Errorf("invalid host name %s: %w", quote(s), err)
	}
	a = strings.ToLower(a)
	for i := 0; i < len(a); i++ {
		c := a[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
			return "", fmt.Errorf("invalid host name %s", quote(s))
		}
	}
	return a, nil
}

// parseIP returns the address of an IP literal, with or without brackets.
func parseIP(s string) (netip.Addr, bool) {
	if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		s = s[1 : len(s)-1]
	}
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

// looksLikeIP reports whether a name would be read as an IPv4 address by
// some resolver (inet_aton accepts "127.1", "0x7f.1" and "2130706433"):
// its last label is all digits or starts with 0x.
func looksLikeIP(name string) bool {
	last := name[strings.LastIndexByte(name, '.')+1:]
	if strings.HasPrefix(last, "0x") {
		return true
	}
	return last != "" && strings.Trim(last, "0123456789") == ""
}

// splitHostPort splits "host", "host:port", "[v6]" or "[v6]:port"; port is
// 0 when absent.
func splitHostPort(s string) (host string, port int, err error) {
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return "", 0, fmt.Errorf("missing ] in %s", quote(s))
		}
		host, rest := s[:end+1], s[end+1:]
		if rest == "" {
			return host, 0, nil
		}
		if rest[0] != ':' {
			return "", 0, fmt.Errorf("junk after ] in %s", quote(s))
		}
		port, err := parsePort(rest[1:])
		return host, port, err
	}
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return s, 0, nil
	}
	if strings.IndexByte(s[:i], ':') >= 0 {
		return "", 0, fmt.Errorf("an IPv6 address needs brackets: %s", quote(s))
	}
	port, err = parsePort(s[i+1:])
	return s[:i], port, err
}

func parsePort(s string) (int, error) {
	p, err := strconv.Atoi(s)
	if err != nil || p < 1 || p > 65535 || s[0] == '+' || s[0] == '0' {
		return 0, fmt.Errorf("invalid port %s", quote(s))
	}
	return p, nil
}

// quote renders untrusted text for a message: quoted, ASCII, at most 100 bytes.
func quote(s string) string {
	if len(s) > 100 {
		s = s[:100] + "..."
	}
	return strconv.QuoteToASCII(s)
}
