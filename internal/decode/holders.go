package decode

import (
	"strconv"
	"strings"
	"time"
)

// Entry is one live holder of a multi-holder lease key (a read-write
// lease's, a semaphore's): its member and its remaining TTL (None: no
// expiry).
type Entry struct {
	Member string
	TTL    time.Duration
}

// None is an Entry's TTL for a member without expiry: the largest
// time.Duration.
const None = time.Duration(1<<63 - 1)

// Entries reads {now_ms, member_1, pttl_1, ...} (rwlease_holders,
// semaphore_holders): now_ms > 0, each member a string, each pttl_ms >= 1
// or, when noExpiry, -1 (None).
func Entries(v any, noExpiry bool) ([]Entry, bool) {
	a, ok := v.([]any)
	if !ok || len(a)%2 != 1 {
		return nil, false
	}
	if now, ok := a[0].(int64); !ok || now <= 0 {
		return nil, false
	}
	out := make([]Entry, 0, len(a)/2)
	for i := 1; i < len(a); i += 2 {
		m, ok1 := a[i].(string)
		p, ok2 := a[i+1].(int64)
		if !ok1 || !ok2 || (p < 1 && !(noExpiry && p == -1)) {
			return nil, false
		}
		ttl := None
		if p != -1 {
			ttl = time.Duration(p) * time.Millisecond
		}
		out = append(out, Entry{Member: m, TTL: ttl})
	}
	return out, true
}

// Permits is one live holder of n permits (a semaphore's, a concurrency
// limiter's): its Entry, whose member is "<prefix><n>:<token>", its n and
// its owner token.
type Permits struct {
	Entry
	N     int64
	Token string
}

// PermitHolders reads a holders script's reply as [Entries] (members
// without expiry allowed) whose every member is prefix "<n>:<token>" with
// 1 <= n <= maxN and a token isToken accepts.
func PermitHolders(v any, prefix string, maxN int64, isToken func(string) bool) ([]Permits, bool) {
	es, ok := Entries(v, true)
	if !ok {
		return nil, false
	}
	out := make([]Permits, len(es))
	for i, e := range es {
		rest, ok := strings.CutPrefix(e.Member, prefix)
		ns, token, ok2 := strings.Cut(rest, ":")
		n, err := strconv.ParseInt(ns, 10, 64)
		if !ok || !ok2 || err != nil || n < 1 || n > maxN || !isToken(token) {
			return nil, false
		}
		out[i] = Permits{Entry: e, N: n, Token: token}
	}
	return out, true
}

// FindPermits returns the holder of token among hs.
func FindPermits(hs []Permits, token string) (Permits, bool) {
	for _, h := range hs {
		if h.Token == token {
			return h, true
		}
	}
	return Permits{}, false
}
