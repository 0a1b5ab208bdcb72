package egress

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
)

// Resolver looks up the addresses of a host name; *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// TestResolver is a static name -> addresses table, for tests and for a
// setting documented as test-only: hosts that tests run on 127.0.0.1 get
// names without a DNS server. Names it does not hold are "not found". The
// proxy checks its answers like any other (127.0.0.1 must still be in
// Config.AllowAddrs). It is immutable and safe for concurrent use.
type TestResolver struct {
	names map[string][]netip.Addr
}

// NewTestResolver returns a resolver for the given table; names are
// normalised as allowlist entries are.
func NewTestResolver(table map[string][]netip.Addr) (*TestResolver, error) {
	r := &TestResolver{names: map[string][]netip.Addr{}}
	for name, addrs := range table {
		if err := r.add(name, addrs...); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func (r *TestResolver) add(name string, addrs ...netip.Addr) error {
	n, err := normalizeName(name)
	if err != nil {
		return fmt.Errorf("test resolver: %w", err)
	}
	for _, a := range addrs {
		if !a.IsValid() {
			return fmt.Errorf("test resolver: %s: invalid address", quote(name))
		}
		r.names[n] = append(r.names[n], a)
	}
	return nil
}

// ParseHostsFile reads a table in /etc/hosts form: "address name [name...]"
// per line, '#' starting a comment.
func ParseHostsFile(rd io.Reader) (*TestResolver, error) {
	r := &TestResolver{names: map[string][]netip.Addr{}}
	sc := bufio.NewScanner(rd)
	for line := 1; sc.Scan(); line++ {
		text, _, _ := strings.Cut(sc.Text(), "#")
		f := strings.Fields(text)
		if len(f) == 0 {
			continue
		}
		a, err := netip.ParseAddr(f[0])
		if err != nil || len(f) < 2 {
			return nil, fmt.Errorf("test resolver: line %d: want \"address name...\"", line)
		}
		for _, name := range f[1:] {
			if err := r.add(name, a); err != nil {
				return nil, fmt.Errorf("line %d: %w", line, err)
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("test resolver: %w", err)
	}
	return r, nil
}

// LookupNetIP answers from the table; network is "ip", "ip4" or "ip6".
func (r *TestResolver) LookupNetIP(_ context.Context, network, host string) ([]netip.Addr, error) {
	n, err := normalizeName(host)
	var out []netip.Addr
	if err == nil {
		for _, a := range r.names[n] {
			if network == "ip" || network == "ip4" && a.Unmap().Is4() || network == "ip6" && !a.Unmap().Is4() {
				out = append(out, a)
			}
		}
	}
	if len(out) == 0 {
		return nil, &net.DNSError{Err: "no such host (test resolver)", Name: host, IsNotFound: true}
	}
	return out, nil
}

// StaticResolver is a name -> address map for tests, one address a name;
// names match as allowlist entries do (case, IDNA, trailing dot).
type StaticResolver map[string]netip.Addr

// LookupNetIP answers from the map.
func (s StaticResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	r := &TestResolver{names: map[string][]netip.Addr{}}
	for name, a := range s {
		if err := r.add(name, a); err != nil {
			return nil, err
		}
	}
	return r.LookupNetIP(ctx, network, host)
}
