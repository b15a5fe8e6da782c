package ratelimit

import (
	"math"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coordkit/coordination/internal/testkit/fuzzseed"
)

// FuzzRetryAfterSeconds: whole seconds rounded up, at least 1, never
// below the duration, for every Duration (no overflow near the largest).
func FuzzRetryAfterSeconds(f *testing.F) {
	fuzzseed.Seeds(f, []any{int64(0)}, []any{int64(1)}, []any{int64(time.Second)}, []any{int64(time.Second + 1)},
		[]any{int64(-5)}, []any{int64(math.MaxInt64)}, []any{int64(math.MinInt64)})
	f.Fuzz(func(t *testing.T, ns int64) {
		d := time.Duration(ns)
		s := RetryAfterSeconds(d)
		if s < 1 || (d > 0 && (time.Duration(s-1)*time.Second >= d || float64(s)*1e9 < float64(d))) {
			t.Fatalf("RetryAfterSeconds(%v) = %d", d, s)
		}
	})
}

// FuzzRateLimitHeaders formats the RateLimit and RateLimit-Policy items of
// a policy with an arbitrary printable name, capacity, window, available
// count and retry time, and parses them back as RFC 8941 lists: each
// value reads as what was formatted, integers within the 15 digits
// Structured Fields allow.
func FuzzRateLimitHeaders(f *testing.F) {
	fuzzseed.Seeds(f,
		[]any{"client", 20, int64(2 * time.Second), int64(0), int64(1500 * time.Millisecond), false},
		[]any{"tenant", 600, int64(time.Minute), int64(587), int64(-1), false},
		[]any{`we"ird\name`, 3, int64(0), int64(1), int64(-1), true},
		[]any{"", 2147483647, int64(1 << 50 * int64(time.Microsecond)), int64(2147483647), int64(math.MaxInt64), false},
	)
	f.Fuzz(func(t *testing.T, name string, capacity int, window, available, retry int64, conc bool) {
		for _, c := range name {
			if c < 0x20 || c > 0x7e {
				return // NewMiddleware refuses the name
			}
		}
		if capacity < 1 || capacity > maxLimit {
			return // limitCheck refuses it
		}
		if window < int64(time.Microsecond) || window > maxSpanUs*int64(time.Microsecond) {
			window = int64(time.Second)
		}
		available = min(max(available, 0), int64(capacity))
		sp := &spec{alg: algFixed, capacity: capacity, window: time.Duration(window)}
		if conc {
			sp.alg = algConc
		}
		l := result{lim: &Limiter{sp: sp}, available: available}
		var secs int64
		if retry >= 0 {
			l.retry, l.hasRetry = time.Duration(retry), true
			secs = RetryAfterSeconds(l.retry)
		}
		var h headers
		h.add(&policy{name: name, quoted: strconv.Quote(name), Policy: Policy{RateLimitHeader: true, PublishQuota: true}}, l, secs)
		w := httptest.NewRecorder()
		h.set(w)
		pol := parseSFItem(t, w.Header().Get("RateLimit-Policy"))
		lim := parseSFItem(t, w.Header().Get("RateLimit"))
		if pol.name != name || lim.name != name {
			t.Fatalf("names %q, %q, want %q", pol.name, lim.name, name)
		}
		if pol.params["q"] != strconv.Itoa(capacity) || lim.params["r"] != strconv.FormatInt(available, 10) {
			t.Fatalf("q=%s r=%s, want %d %d", pol.params["q"], lim.params["r"], capacity, available)
		}
		if conc {
			if pol.params["qu"] != `"concurrent-requests"` || pol.params["w"] != "" {
				t.Fatalf("concurrency policy params %v", pol.params)
			}
		} else if pol.params["w"] != strconv.FormatInt(RetryAfterSeconds(time.Duration(window)), 10) {
			t.Fatalf("w=%s for window %v", pol.params["w"], time.Duration(window))
		}
		if want := ""; l.hasRetry {
			want = strconv.FormatInt(RetryAfterSeconds(l.retry), 10)
			if lim.params["t"] != want {
				t.Fatalf("t=%s, want %s", lim.params["t"], want)
			}
		} else if _, ok := lim.params["t"]; ok {
			t.Fatal("t without a retry")
		}
	})
}

type sfItem struct {
	name   string
	params map[string]string
}

// parseSFItem parses one RFC 8941 list member: an sf-string with
// parameters whose values are sf-integers (at most 15 digits) or
// sf-strings.
func parseSFItem(t *testing.T, s string) sfItem {
	t.Helper()
	str := func() string {
		if s == "" || s[0] != '"' {
			t.Fatalf("no sf-string at %q", s)
		}
		var b strings.Builder
		for i := 1; i < len(s); i++ {
			switch c := s[i]; {
			case c == '\\' && i+1 < len(s) && (s[i+1] == '"' || s[i+1] == '\\'):
				i++
				b.WriteByte(s[i])
			case c == '"':
				s = s[i+1:]
				return b.String()
			case c < 0x20 || c > 0x7e || c == '\\':
				t.Fatalf("bad sf-string character %q", c)
			default:
				b.WriteByte(c)
			}
		}
		t.Fatalf("unterminated sf-string")
		return ""
	}
	it := sfItem{name: str(), params: map[string]string{}}
	for s != "" {
		if s[0] != ';' {
			t.Fatalf("expected ';' at %q", s)
		}
		s = s[1:]
		k, rest, ok := strings.Cut(s, "=")
		if !ok || k == "" || strings.Trim(k, "abcdefghijklmnopqrstuvwxyz") != "" {
			t.Fatalf("bad parameter key at %q", s)
		}
		s = rest
		if strings.HasPrefix(s, `"`) {
			it.params[k] = strconv.Quote(str())
			continue
		}
		n := 0
		for n < len(s) && s[n] >= '0' && s[n] <= '9' {
			n++
		}
		if n == 0 || n > 15 {
			t.Fatalf("parameter %s: %q is not an sf-integer", k, s)
		}
		it.params[k], s = s[:n], s[n:]
	}
	return it
}
