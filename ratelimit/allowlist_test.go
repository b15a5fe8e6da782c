package ratelimit

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// An identity on the allow list is never limited: every call of every
// algorithm is granted at once, whatever the permits, with Available -1,
// without a decision (the limiter's key is never created) and with at
// most one read of the list (through its cache); an identity on both
// lists is denied; one taken off the list is limited again at once here.
func TestAllowListNeverLimits(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Raw(t)
		client := b.Client(t)
		reads := &readCounter{}
		client.AddHook(reads)
		mp, ms := newMeterProvider(t)
		c, err := coordination.New(client, coordination.WithKeyPrefix(b.Prefix()), coordination.WithMeterProvider(mp))
		if err != nil {
			t.Fatal(err)
		}
		list, err := NewAllowList(c, "allow")
		if err != nil {
			t.Fatal(err)
		}
		if err := list.Allow(ctx, "partner:1"); err != nil {
			t.Fatal(err)
		}
		if in, err := list.Allowed(ctx, "partner:1"); err != nil || !in {
			t.Fatalf("Allowed(partner:1) = %v, %v", in, err)
		}
		if err := denyReadScript.Load(ctx, testharnessEngine(t, b).e); err != nil {
			t.Fatal(err)
		}
		before := reads.n.Load()
		for _, k := range every {
			key := "allowed:" + string(k)
			l := build(t, c, k, key, 1, time.Minute, WithAllowList(list, "partner:1"))
			for _, permits := range []int{1, 1, 1} {
				le := acquire(t, l, permits)
				if !le.Acquired() || le.Denied() || le.Available() != -1 {
					t.Fatalf("%s: an allowed identity: acquired=%v denied=%v available=%d", k, le.Acquired(), le.Denied(), le.Available())
				}
				if k == kConc {
					if le.Context().Err() != nil {
						t.Fatalf("%s: the context of a lease holding nothing ended", k)
					}
					if err := le.Release(ctx); err != nil {
						t.Fatalf("%s: release: %v", k, err)
					}
				}
			}
			if le, err := l.Wait(ctx, 1); err != nil || !le.Acquired() {
				t.Fatalf("%s: Wait for an allowed identity: %v", k, err)
			}
			if n, _ := raw.Exists(ctx, b.Key(key)).Result(); n != 0 {
				t.Fatalf("%s: an allowed identity touched the capacity key", k)
			}
		}
		if n := reads.n.Load() - before; n > 1 {
			t.Fatalf("%d reads of the allow list for %d calls within its cache lifetime, want at most 1", n, 4*len(every))
		}
		wantMetrics(t, ms.collect(t), map[string]int64{
			"coordination.rate_limit.allowed{reason=allow_list}": int64(4 * len(every)),
			"coordination.rate_limit.allowed":                    0,
		})

		// On both lists: denied.
		deny, err := NewDenyList(c, "deny-too")
		if err != nil {
			t.Fatal(err)
		}
		if err := deny.Deny(ctx, "partner:1"); err != nil {
			t.Fatal(err)
		}
		both := build(t, c, kGCRA, "both", 3, time.Minute, WithDenyList(deny, "partner:1"), WithAllowList(list, "partner:1"))
		if le := acquire(t, both, 1); le.Acquired() || !le.Denied() {
			t.Fatalf("on both lists: acquired=%v denied=%v, want denied", le.Acquired(), le.Denied())
		}
		// Off the list: limited again.
		l := build(t, c, kGCRA, "removed", 1, time.Minute, WithAllowList(list, "partner:1"))
		if err := list.Remove(ctx, "partner:1"); err != nil {
			t.Fatal(err)
		}
		if !acquire(t, l, 1).Acquired() || acquire(t, l, 1).Acquired() {
			t.Fatal("an identity taken off the allow list is not limited")
		}
		if n, _ := raw.SCard(ctx, b.Key("allow")).Result(); n != 0 {
			t.Fatalf("the allow list holds %d members after the removal", n)
		}
	})
}

// testharnessEngine returns an engine of the backend's admin client, to
// load the read script (SCRIPT LOAD is not the library's to send).
func testharnessEngine(t *testing.T, b *testharness.Backend) *DenyList {
	t.Helper()
	client := b.Client(t)
	d, err := NewDenyList(withClient(t, b, testharness.AdminOf(t, client)), "allow")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Counted in coordination.rate_limit.allowed with reason=allow_list; an
// allowed identity does not queue behind waiters; its hooks are RATE
// LIMIT ALLOW LIST READ and WRITE (a limiter's own checks unadmitted).
func TestAllowListMetricsQueueAndHooks(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		rec := &recorder{}
		mp, ms := newMeterProvider(t)
		c := b.Coordinator(t, coordination.WithHooks(rec), coordination.WithMeterProvider(mp))
		list, err := NewAllowList(c, "allow-q")
		if err != nil {
			t.Fatal(err)
		}
		l := build(t, c, kGCRA, "allow-q:lim", 1, time.Minute, WithAllowList(list, "partner:2"))
		acquire(t, l, 1) // partner:2 is not on the list yet: its one permit
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		queued := make(chan error, 1)
		go func() { _, err := l.Wait(wctx, 1); queued <- err }()
		deadline := time.Now().Add(5 * time.Second)
		for l.lim().Statistics().QueuedPermits != 1 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		rec.take()
		if err := list.Allow(ctx, "partner:2"); err != nil {
			t.Fatal(err)
		}
		if got := rec.take(); len(got) != 1 || got[0] != hooks.RateLimitAllowListWrite+" rate_limit succeeded" {
			t.Fatalf("ops %v", got)
		}
		if in, err := list.Allowed(ctx, "partner:2"); err != nil || !in {
			t.Fatalf("Allowed = %v, %v", in, err)
		}
		if got := rec.take(); len(got) != 1 || got[0] != hooks.RateLimitAllowListRead+" rate_limit succeeded" {
			t.Fatalf("ops %v", got)
		}
		start := time.Now()
		if le, err := l.Wait(ctx, 1); err != nil || !le.Acquired() || time.Since(start) > 5*time.Second {
			t.Fatalf("an allowed identity behind a waiter: %v after %v", err, time.Since(start))
		}
		if got := rec.take(); len(got) != 1 || got[0] != hooks.RateLimitAcquire+" rate_limit succeeded" {
			t.Fatalf("ops %v (the limiter's own check is not admitted)", got)
		}
		cancel()
		if err := <-queued; !errors.Is(err, context.Canceled) {
			t.Fatalf("the waiter queued before: %v, want canceled (it sleeps until its retry time)", err)
		}
		wantMetrics(t, ms.collect(t), map[string]int64{
			"coordination.rate_limit.allowed":                    1,
			"coordination.rate_limit.allowed{reason=allow_list}": 1,
		})
	})
}

// Through the middleware the identity is the partition (the factory binds
// each partition's limiter to it): an allowed client is never refused and
// gets no RateLimit item (nothing was decided), others are limited.
func TestMiddlewareAllowList(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		c := b.Coordinator(t)
		list, err := NewAllowList(c, "mw-allow")
		if err != nil {
			t.Fatal(err)
		}
		if err := list.Allow(ctx, "203.0.113.9"); err != nil {
			t.Fatal(err)
		}
		p, err := NewPartitioned(func(ip string) (*Limiter, error) {
			return New(c, PartitionKey("mw-allow:ip", ip), GCRA{Burst: 1, Interval: time.Minute}, WithAllowList(list, ip))
		})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		mw, err := NewMiddleware([]Policy{{Name: "ip", Partitioned: p, Partition: ClientIP, RateLimitHeader: true}},
			WithLogger(slog.New(slog.DiscardHandler)))
		if err != nil {
			t.Fatal(err)
		}
		h := mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
		for i := range 3 {
			w := serve(t, h, "/work")
			if w.Code != http.StatusNoContent {
				t.Fatalf("allowed client, request %d: %d %s", i+1, w.Code, w.Body)
			}
			checkHeaderKeys(t, "allowed", w)
		}
		other := func() int {
			w := httptest.NewRecorder()
			r := httptest.NewRequest("GET", "/work", nil)
			r.RemoteAddr = "198.51.100.7:1234"
			h.ServeHTTP(w, r)
			if w.Code == http.StatusTooManyRequests && !strings.Contains(w.Body.String(), `"violated-policies":["ip"]`) {
				t.Fatalf("body %s", w.Body)
			}
			return w.Code
		}
		if a, b := other(), other(); a != http.StatusNoContent || b != http.StatusTooManyRequests {
			t.Fatalf("another client: %d then %d, want 204 then 429", a, b)
		}
	})
}

// Bad arguments name the argument; a nil list's methods fail naming it.
func TestAllowListArguments(t *testing.T) {
	b := testharness.Get(t, "miniredis")
	c := b.Coordinator(t)
	list, err := NewAllowList(c, "args")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		err  error
		name string
	}{
		{func() error {
			_, err := New(c, "k", GCRA{Burst: 1, Interval: time.Second}, WithAllowList(nil, "x"))
			return err
		}(), "allowList"},
		{func() error {
			_, err := New(c, "k", GCRA{Burst: 1, Interval: time.Second}, WithAllowList(list, ""))
			return err
		}(), "identity"},
		{func() error { _, err := NewAllowList(nil, "k"); return err }(), "coord"},
		{func() error { _, err := NewAllowList(c, ""); return err }(), "key"},
		{func() error { _, err := NewAllowList(c, "k", WithDenyCache(0, time.Second)); return err }(), "capacity"},
		{(*AllowList)(nil).Allow(ctx, "x"), "allowList"},
		{func() error { _, err := (*AllowList)(nil).Allowed(ctx, "x"); return err }(), "allowList"},
		{list.Remove(ctx, ""), "identity"},
	} {
		if !errors.Is(tc.err, coordination.ErrInvalidArgument) || !strings.Contains(tc.err.Error(), "argument "+tc.name+":") {
			t.Errorf("%v: want ErrInvalidArgument naming %s", tc.err, tc.name)
		}
	}
	if err := (*AllowList)(nil).Allow(ctx, "x"); !strings.Contains(err.Error(), "rate limit allow list write:") {
		t.Errorf("a nil list's error does not name the operation: %v", err)
	}
	(*AllowList)(nil).Invalidate()
}
