package ratelimit

import (
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/coordkit/coordination/internal/check"
)

// ClientIP returns the request's client address as a partition key: the
// address of its immediate peer (r.RemoteAddr without its port; an
// IPv4-mapped IPv6 address becomes plain IPv4; a zone is dropped), an IPv4
// address whole ("203.0.113.7") and an IPv6 address by its /64 network
// ("2001:db8:1:2::/64"), or "unknown" when RemoteAddr cannot be parsed. A
// /64 is what one subscriber is usually given, so a client cannot escape
// its limit by rotating through the 2^64 addresses of its own network.
//
// It reads no forwarded header (clients control them): behind a proxy use
// [NewClientIP] with the proxy's addresses in
// [ClientIPConfig.TrustedProxies]. ClientIP is NewClientIP with a zero
// ClientIPConfig; it is safe for concurrent use. A server on a Unix socket
// has no peer address: every request is then "unknown", one partition;
// partition by something else there (an authenticated client, or the
// address your proxy forwards, read by your own code).
func ClientIP(r *http.Request) string { return defaultClientIP.partition(r) }

var defaultClientIP = clientIP{v4: 32, v6: 64}

// ClientIPConfig configures [NewClientIP]. The zero value is [ClientIP]'s
// behaviour.
type ClientIPConfig struct {
	// IPv4PrefixBits groups IPv4 clients by their network of this many
	// bits, 1 to 32; 0 means 32 (each address its own partition). 24
	// makes a /24 one partition, shown "192.0.2.0/24".
	IPv4PrefixBits int
	// IPv6PrefixBits groups IPv6 clients by their network of this many
	// bits, 1 to 128; 0 means 64 (a subscriber's usual network). 128
	// makes each address its own partition, shown without a prefix.
	IPv6PrefixBits int
	// TrustedProxies lists the networks of the reverse proxies and load
	// balancers in front of the server. When the immediate peer is in
	// one, the client's address is taken from the forwarded header
	// (ProxyHeader): its values are read from the right (the nearest
	// proxy's addition first), skipping the addresses of trusted proxies,
	// and the first untrusted address is the client. The left-most value
	// is never believed for being left-most: a client can write anything
	// there. Empty: forwarded headers are ignored (and ProxyHeader and
	// MaxProxyHops must be left zero). An IPv4-mapped IPv6 prefix
	// ("::ffff:10.0.0.0/104") counts as its IPv4 network.
	TrustedProxies []netip.Prefix
	// ProxyHeader names the forwarded header: "X-Forwarded-For" (the
	// default) or "Forwarded" (RFC 7239, its for= parameters). Every
	// line of the header counts, in order, as one list.
	ProxyHeader string
	// MaxProxyHops bounds how many trusted proxies are passed, the
	// immediate peer included, 1 to 16; 0 means 1 (one proxy in front).
	// When the chain has more trusted hops than this, the address reached
	// at the bound is the client's.
	MaxProxyHops int
}

// NewClientIP returns a partition function like [ClientIP] with cfg's
// grouping and trusted proxies, for [Policy.Partition]. It returns an
// error wrapping coordination.ErrInvalidArgument naming the field when
// a prefix length or MaxProxyHops is out of range, a trusted proxy is
// not a valid prefix, or ProxyHeader is neither header. The function
// returned reads nothing but the request and is safe for concurrent use.
//
// The rule for forwarded headers (walk from the right, trust only
// configured proxies, stop at the first untrusted address) is the one
// MDN's X-Forwarded-For page recommends; a header value that is not an
// address where one is needed ends the walk at the last trusted address,
// which then stands for the client.
func NewClientIP(cfg ClientIPConfig) (func(*http.Request) string, error) {
	c := clientIP{v4: cfg.IPv4PrefixBits, v6: cfg.IPv6PrefixBits, hops: cfg.MaxProxyHops}
	if c.v4 == 0 {
		c.v4 = 32
	}
	if c.v6 == 0 {
		c.v6 = 64
	}
	if c.hops == 0 {
		c.hops = 1
	}
	switch {
	case c.v4 < 1 || c.v4 > 32:
		return nil, check.InvalidArgument("IPv4PrefixBits", "must be 1 to 32 (0: 32), got %d", cfg.IPv4PrefixBits)
	case c.v6 < 1 || c.v6 > 128:
		return nil, check.InvalidArgument("IPv6PrefixBits", "must be 1 to 128 (0: 64), got %d", cfg.IPv6PrefixBits)
	case c.hops < 1 || c.hops > 16:
		return nil, check.InvalidArgument("MaxProxyHops", "must be 1 to 16 (0: 1), got %d", cfg.MaxProxyHops)
	}
	switch http.CanonicalHeaderKey(cfg.ProxyHeader) {
	case "", "X-Forwarded-For":
		c.header = "X-Forwarded-For"
	case "Forwarded":
		c.header, c.rfc7239 = "Forwarded", true
	default:
		return nil, check.InvalidArgument("ProxyHeader", `must be "X-Forwarded-For" or "Forwarded", got %q`, cfg.ProxyHeader)
	}
	if len(cfg.TrustedProxies) == 0 && (cfg.ProxyHeader != "" || cfg.MaxProxyHops != 0) {
		return nil, check.InvalidArgument("TrustedProxies", "is empty, so ProxyHeader and MaxProxyHops would be ignored: list the proxies whose header to believe")
	}
	for i, p := range cfg.TrustedProxies {
		if !p.IsValid() {
			return nil, check.InvalidArgument("TrustedProxies", "entry %d is not a valid prefix", i)
		}
		if p.Addr().Is4In6() { // peers are compared unmapped
			if p.Bits() < 96 {
				return nil, check.InvalidArgument("TrustedProxies", "entry %d (%v) mixes IPv4-mapped and other IPv6 addresses; give the IPv4 network", i, p)
			}
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		c.trusted = append(c.trusted, p.Masked())
	}
	return c.partition, nil
}

// clientIP is a configured [ClientIP].
type clientIP struct {
	v4, v6  int
	hops    int
	trusted []netip.Prefix
	header  string
	rfc7239 bool
}

func (c clientIP) partition(r *http.Request) string {
	a, ok := peerAddr(r.RemoteAddr)
	if !ok {
		return "unknown"
	}
	if len(c.trusted) > 0 {
		a = c.throughProxies(r, a)
	}
	return c.group(a)
}

// throughProxies walks the forwarded header from the right while the
// address reached is a trusted proxy, at most c.hops proxies.
func (c clientIP) throughProxies(r *http.Request, peer netip.Addr) netip.Addr {
	a := peer
	if !c.isTrusted(a) {
		return a
	}
	// The values nearest the end, right to left: at most one per hop.
	values := lastForwarded(r.Header.Values(c.header), c.hops, c.rfc7239)
	for _, v := range values {
		next, ok := peerAddr(strings.Trim(strings.TrimSpace(v), `"`))
		if !ok {
			return a
		}
		a = next
		if !c.isTrusted(a) {
			return a
		}
	}
	return a
}

func (c clientIP) isTrusted(a netip.Addr) bool {
	for _, p := range c.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// peerAddr parses host, host:port or [host] into an unmapped address
// without zone.
func peerAddr(s string) (netip.Addr, bool) {
	host := s
	if h, _, err := net.SplitHostPort(s); err == nil {
		host = h
	} else if len(s) > 2 && s[0] == '[' && s[len(s)-1] == ']' {
		host = s[1 : len(s)-1] // an IPv6 address in brackets, without a port
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap().WithZone(""), true
}

// lastForwarded returns the last n items of the header's lines (taken
// as one comma-separated list), right to left, reading only as far back
// as it needs: a long header costs no more than a short one. Items are
// X-Forwarded-For's values or, for RFC 7239 (rfc7239), each element's
// for= parameter ("" for an element without one, which ends a walk);
// there a comma inside a quoted string does not separate.
func lastForwarded(lines []string, n int, rfc7239 bool) []string {
	out := make([]string, 0, n)
	for i := len(lines) - 1; i >= 0 && len(out) < n; i-- {
		line := lines[i]
		for len(out) < n {
			cut := lastComma(line, rfc7239)
			item := line[cut+1:]
			if rfc7239 {
				item = forParam(item)
			}
			out = append(out, item)
			if cut < 0 {
				break
			}
			line = line[:cut]
		}
	}
	return out
}

// lastComma returns the index of line's last separating comma, or -1; with
// quoted, commas between double quotes do not count (an unbalanced quote
// makes the rest one item).
func lastComma(line string, quoted bool) int {
	if !quoted {
		return strings.LastIndexByte(line, ',')
	}
	in := false
	for i := len(line) - 1; i >= 0; i-- {
		switch line[i] {
		case '"':
			in = !in
		case ',':
			if !in {
				return i
			}
		}
	}
	return -1
}

// forParam returns the for= parameter of one RFC 7239 element, or "".
func forParam(element string) string {
	v := ""
	for pair := range strings.SplitSeq(element, ";") {
		k, val, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if ok && strings.EqualFold(k, "for") {
			v = val
		}
	}
	return v
}

// group returns a's partition: the address, or its network when grouped.
func (c clientIP) group(a netip.Addr) string {
	bits := c.v6
	if a.Is4() {
		bits = c.v4
	}
	if bits == a.BitLen() {
		return a.String()
	}
	p, err := a.Prefix(bits)
	if err != nil {
		return "unknown"
	}
	return p.String()
}
