// Package egress is the filtering egress proxy of one run: the only way a
// sandboxed program reaches the network. pybox starts one Proxy per run (or
// install) on the host and hands the container a unix socket to it; the
// container itself has no interface but loopback.
//
// The proxy speaks HTTP CONNECT (for TLS and any other TCP), plain HTTP
// forwarding of absolute-form requests (one request per client connection,
// rewritten to origin-form with hop-by-hop and Proxy-* headers removed, the
// Host set to the checked name), and SOCKS5 CONNECT without authentication
// (socks5h: the client sends the name), all on the same listener: a first
// byte 5 is SOCKS.
//
// Guarantees, for every connection:
//   - The destination is the host name the client asked for (the CONNECT
//     authority, the absolute URL's host or the SOCKS5 address), case-folded, IDNA-normalised and
//     without a trailing dot, and it must be on the Allowlist. A Host header
//     that names another host is refused (no smuggling). An IP literal (and
//     anything that looks like one, such as "2130706433") is refused unless it
//     is on the Allowlist as a literal and inside Config.AllowAddrs.
//   - The proxy resolves the name itself and checks every address: loopback,
//     link-local (with the cloud metadata address), private, shared (CGNAT),
//     unspecified, multicast, reserved and other special-purpose ranges, the
//     IPv4-mapped, NAT64 and 6to4 forms of these, and the host's own
//     interface addresses are refused unless inside Config.AllowAddrs. One
//     refused address refuses the name. The proxy then dials a checked
//     address, never the name, so a second DNS answer (rebinding) cannot
//     change where it connects.
//   - A tunnel (CONNECT or SOCKS5) whose client starts TLS must name the
//     same host in its ClientHello (SNI), or it is cut before a byte goes up:
//     a client cannot ask a shared front (a CDN) of an allowed host for
//     another site by SNI. It still can by the Host header inside TLS,
//     which the proxy does not see (domain fronting, where the CDN allows
//     it): allow shared fronts knowingly. Encrypted ClientHello (ECH)
//     shows the front's public name and is cut.
//   - Limits bound the run: bytes each way, connections at once (the rest are
//     closed before anything is read from them), connections in all, the size
//     of a request head, the time to send it (slow loris) and idle time.
//     Memory is bounded by construction: at most Limits.Concurrent
//     connections are served, each with fixed buffers, and the Report holds
//     at most Limits.Total destinations.
//   - A refusal gets a clear HTTP status and a one-line reason, both in the
//     status line and the body ("pybox egress: example.org:443 refused (not
//     on the allowlist)"), and every allowed and refused destination is in
//     the Report, per host:port.
//
// Lifecycle: New validates a Config; Serve runs until its context ends or
// its listener closes, then closes every connection and waits for every
// goroutine it started. A Proxy and its Report are safe for concurrent use.
package egress
