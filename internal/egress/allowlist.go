package egress

import (
	"fmt"
	"slices"
	"strings"
)

// Allowlist is a parsed set of destinations. Its zero value allows nothing.
// It is immutable after ParseAllowlist and safe for concurrent use.
type Allowlist struct {
	exact    map[string]ports // "api.example.com", or an IP literal in canonical form
	suffixes map[string]ports // "example.com" for the entry "*.example.com"
}

// ports is the set of ports an entry allows: 80 and 443 when an entry names
// no port, plus each port named.
type ports struct {
	web  bool
	list []int
}

func (p ports) has(port int) bool {
	return p.web && (port == 80 || port == 443) || slices.Contains(p.list, port)
}

func (p ports) add(port int) ports {
	if port == 0 {
		p.web = true
	} else if !slices.Contains(p.list, port) {
		p.list = append(p.list, port)
	}
	return p
}

// ParseAllowlist parses allowlist entries:
//
//	api.example.com        the host itself, on ports 80 and 443
//	api.example.com:8443   the host on port 8443 only
//	*.example.com          any subdomain at any depth, not example.com itself
//	*.example.com:8080     the same on port 8080
//	203.0.113.7:443        an IP literal ([2001:db8::1]:443 for IPv6), which is
//	                       also refused unless inside Config.AllowAddrs
//
// An entry without a port allows 80 and 443 only (the web), so that naming a
// host does not open its SSH or database ports. Names are case-folded,
// IDNA-normalised (a Unicode name and its xn-- form are one entry) and lose a
// trailing dot. Entries that name no host ("*", "*.com" with a single label,
// a URL, a path, an empty string) are errors, so a typo cannot open more
// than meant.
func ParseAllowlist(entries []string) (Allowlist, error) {
	a := Allowlist{exact: map[string]ports{}, suffixes: map[string]ports{}}
	for _, e := range entries {
		if err := a.add(e); err != nil {
			return Allowlist{}, fmt.Errorf("egress allowlist entry %s: %w", quote(e), err)
		}
	}
	return a, nil
}

func (a Allowlist) add(e string) error {
	e = strings.TrimSpace(e)
	if strings.ContainsAny(e, "/@?# \t") {
		return fmt.Errorf("want a host name with an optional :port, not a URL")
	}
	host, port, err := splitHostPort(e)
	if err != nil {
		return err
	}
	if ip, ok := parseIP(host); ok {
		a.exact[ip.String()] = a.exact[ip.String()].add(port)
		return nil
	}
	wild := strings.HasPrefix(host, "*.")
	name, err := normalizeName(strings.TrimPrefix(host, "*."))
	if err != nil {
		return err
	}
	if looksLikeIP(name) {
		return fmt.Errorf("%s is not a valid IP address or host name", quote(host))
	}
	if !wild {
		a.exact[name] = a.exact[name].add(port)
		return nil
	}
	if !strings.Contains(name, ".") {
		return fmt.Errorf("a wildcard needs at least two labels after *. (it would allow a whole top-level domain)")
	}
	a.suffixes[name] = a.suffixes[name].add(port)
	return nil
}

// Empty reports whether the allowlist allows nothing (no network at all).
func (a Allowlist) Empty() bool { return len(a.exact) == 0 && len(a.suffixes) == 0 }

// Allows reports whether host:port is on the list. host is normalised as the
// entries are (a Unicode name matches its xn-- entry); an IP literal matches
// only an entry naming that literal.
func (a Allowlist) Allows(host string, port int) bool {
	if ip, ok := parseIP(host); ok {
		return a.exact[ip.String()].has(port)
	}
	name, err := normalizeName(host)
	if err != nil {
		return false
	}
	return a.allowsName(name, port)
}

// allowsName matches a name already normalised.
func (a Allowlist) allowsName(name string, port int) bool {
	if a.exact[name].has(port) {
		return true
	}
	for i := 0; i < len(name); i++ {
		if name[i] == '.' && a.suffixes[name[i+1:]].has(port) {
			return true
		}
	}
	return false
}

// String lists the entries, sorted, in their normalised form.
func (a Allowlist) String() string {
	var out []string
	each := func(m map[string]ports, prefix string) {
		for h, p := range m {
			if strings.Contains(h, ":") {
				h = "[" + h + "]"
			}
			if p.web {
				out = append(out, prefix+h)
			}
			for _, n := range p.list {
				out = append(out, fmt.Sprintf("%s%s:%d", prefix, h, n))
			}
		}
	}
	each(a.exact, "")
	each(a.suffixes, "*.")
	slices.Sort(out)
	return strings.Join(out, ",")
}
