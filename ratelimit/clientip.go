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
// ClientIPConfig; it is safe for concurrent use.
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
	// there. Empty: forwarded headers are ignored.
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
	for i, p := range cfg.TrustedProxies {
		if !p.IsValid() {
			return nil, check.InvalidArgument("TrustedProxies", "entry %d is not a valid prefix", i)
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
	values := forwardedValues(r.Header.Values(c.header), c.rfc7239)
	for hop := 0; hop < c.hops && len(values) > 0; hop++ {
		next, ok := c.parse(values[len(values)-1])
		if !ok {
			return a
		}
		values = values[:len(values)-1]
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

// parse reads one forwarded value: an address, with a port when it has
// brackets ("[2001:db8::1]:443") or one colon ("192.0.2.1:80"); RFC 7239
// values may be quoted.
func (c clientIP) parse(v string) (netip.Addr, bool) {
	v = strings.Trim(strings.TrimSpace(v), `"`)
	if a, ok := peerAddr(v); ok {
		return a, true
	}
	return netip.Addr{}, false
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

// forwardedValues returns the addresses of the header's lines in order:
// X-Forwarded-For's comma-separated items, or the for= parameter of each
// RFC 7239 element ("" for an element without one, which ends a walk).
func forwardedValues(lines []string, rfc7239 bool) []string {
	var out []string
	for _, line := range lines {
		for item := range strings.SplitSeq(line, ",") {
			if !rfc7239 {
				out = append(out, item)
				continue
			}
			v := ""
			for pair := range strings.SplitSeq(item, ";") {
				k, val, ok := strings.Cut(strings.TrimSpace(pair), "=")
				if ok && strings.EqualFold(k, "for") {
					v = val
				}
			}
			out = append(out, v)
		}
	}
	return out
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
