package ratelimit

import (
	"net/http/httptest"
	"strconv"
	"testing"
	"time"
)

// The RateLimit fields join every policy's item in order, past the two
// kept in place, and a policy's cached RateLimit-Policy item follows its
// limiter's settings (an Update, or another partition's limiter).
func TestHeadersJoinAndPolicyItemCache(t *testing.T) {
	fixed := func(capacity int, window time.Duration) *Limiter {
		return &Limiter{sp: &spec{alg: algFixed, capacity: capacity, window: window}}
	}
	var h headers
	ps := make([]policy, 4)
	for i := range ps {
		name := "p" + strconv.Itoa(i)
		ps[i] = policy{name: name, quoted: strconv.Quote(name), Policy: Policy{RateLimitHeader: true, PublishQuota: true}}
		h.add(&ps[i], result{lim: fixed(10*(i+1), time.Minute), available: int64(i)}, 0)
	}
	w := httptest.NewRecorder()
	h.set(w)
	if got, want := w.Header().Get("RateLimit-Policy"), `"p0";q=10;w=60, "p1";q=20;w=60, "p2";q=30;w=60, "p3";q=40;w=60`; got != want {
		t.Fatalf("RateLimit-Policy %q, want %q", got, want)
	}
	if got, want := w.Header().Get("RateLimit"), `"p0";r=0, "p1";r=1, "p2";r=2, "p3";r=3`; got != want {
		t.Fatalf("RateLimit %q, want %q", got, want)
	}
	p := &ps[0]
	for _, c := range []struct {
		lim  *Limiter
		want string
	}{
		{fixed(10, time.Minute), `"p0";q=10;w=60`},
		{fixed(10, time.Hour), `"p0";q=10;w=3600`},
		{fixed(7, time.Hour), `"p0";q=7;w=3600`},
		{&Limiter{sp: &spec{alg: algConc, capacity: 7}}, `"p0";q=7;qu="concurrent-requests"`},
		{fixed(7, time.Hour), `"p0";q=7;w=3600`},
	} {
		if got := p.item(c.lim.spec()); got != c.want {
			t.Fatalf("item %q, want %q", got, c.want)
		}
	}
	var none headers
	w = httptest.NewRecorder()
	none.set(w)
	if len(w.Header()) != 0 {
		t.Fatalf("fields without a decision: %v", w.Header())
	}

	// Each field on its own: only what a policy asks for, none by default
	// (and t only with a retry).
	for _, c := range []struct {
		pol         Policy
		policy, lim string
	}{
		{Policy{}, "", ""},
		{Policy{RateLimitHeader: true}, "", `"p";r=3;t=7`},
		{Policy{PublishQuota: true}, `"p";q=10;w=60`, ""},
		{Policy{RateLimitHeader: true, PublishQuota: true}, `"p";q=10;w=60`, `"p";r=3;t=7`},
	} {
		var h headers
		h.add(&policy{name: "p", quoted: `"p"`, Policy: c.pol}, result{lim: fixed(10, time.Minute), available: 3}, 7)
		w := httptest.NewRecorder()
		h.set(w)
		if got := w.Header()["Ratelimit-Policy"]; (c.policy == "" && got != nil) || (c.policy != "" && (len(got) != 1 || got[0] != c.policy)) {
			t.Fatalf("%+v: RateLimit-Policy %q, want %q", c.pol, got, c.policy)
		}
		if got := w.Header()["Ratelimit"]; (c.lim == "" && got != nil) || (c.lim != "" && (len(got) != 1 || got[0] != c.lim)) {
			t.Fatalf("%+v: RateLimit %q, want %q", c.pol, got, c.lim)
		}
	}
}
