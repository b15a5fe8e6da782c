package decode

import "time"

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
