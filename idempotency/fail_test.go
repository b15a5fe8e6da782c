package idempotency_test

import (
	"strings"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/idempotency"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// Fail turns the caller's pending claim into a failed one that keeps the
// claim's TTL and its fingerprint: Begin answers Failed at once (with the
// remaining TTL) instead of InProgress, waiters are woken with it,
// Complete, Abandon and a second Fail change nothing, Forget clears it,
// and after it expires the next Begin starts a claim with a larger fence.
func TestFail(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		f := newFixture(t, b)
		ctx := t.Context()
		fp := idempotency.WithFingerprint("req")
		c := f.begin(t, "k", 10*time.Second, fp)
		if f.fail(t, "k", "not-the-owner") {
			t.Fatal("Fail by a wrong owner = true")
		}
		wantState(t, f.begin(t, "k", time.Minute, fp), idempotency.InProgress)
		if !f.fail(t, "k", c.Owner) {
			t.Fatal("Fail by the owner = false")
		}
		raw, err := f.raw.Get(ctx, b.Key("k")).Result()
		if err != nil || !strings.HasPrefix(raw, "F") || !strings.HasSuffix(raw, ":3:req") {
			t.Fatalf("stored %q, %v; want a failed claim keeping the fingerprint", raw, err)
		}
		if d := f.pttl(t, "k"); d <= 9*time.Second || d > 10*time.Second {
			t.Fatalf("PTTL after Fail = %v, want the claim's remaining ~10s kept", d)
		}
		got := f.begin(t, "k", time.Minute, fp)
		wantState(t, got, idempotency.Failed)
		if got.Remaining <= 9*time.Second || got.Remaining > 10*time.Second {
			t.Fatalf("Remaining = %v, want ~10s", got.Remaining)
		}
		wantState(t, f.begin(t, "k", time.Minute, idempotency.WithFingerprint("other")), idempotency.FingerprintMismatch)
		if f.fail(t, "k", c.Owner) || f.complete(t, "k", c.Owner, []byte("late")) || f.abandon(t, "k", c.Owner) {
			t.Fatal("Fail, Complete or Abandon of a failed claim = true")
		}
		wantState(t, f.begin(t, "k", time.Minute, fp), idempotency.Failed)

		// Expiry: the next Begin starts afresh, with a larger fence.
		b.Advance(10*time.Second + 100*time.Millisecond)
		next := f.begin(t, "k", time.Minute, fp)
		wantState(t, next, idempotency.Started)
		if next.Fence <= c.Fence {
			t.Fatalf("fence after the failed claim expired = %d, want > %d", next.Fence, c.Fence)
		}
		// Forget clears a failed claim at once.
		if !f.fail(t, "k", next.Owner) {
			t.Fatal("Fail = false")
		}
		if ok, err := f.store.Forget(ctx, "k"); !ok || err != nil {
			t.Fatalf("Forget of a failed claim = %v, %v", ok, err)
		}
		wantState(t, f.begin(t, "k", time.Minute, fp), idempotency.Started)
		if f.fail(t, "never", c.Owner) {
			t.Fatal("Fail of a key never claimed = true")
		}
	})
}

// A caller waiting on a pending claim (WithWait) is woken by Fail and
// answered Failed long before the claim would have expired.
func TestFailWakesWaiters(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		f := newFixture(t, b)
		c := f.begin(t, "k", time.Minute)
		done := make(chan idempotency.Claim, 1)
		go func() {
			w, err := f.store.Begin(t.Context(), "k", time.Minute, idempotency.WithWait(time.Minute))
			if err != nil {
				t.Error(err)
			}
			done <- w
		}()
		time.Sleep(100 * time.Millisecond) // let it wait
		start := time.Now()
		if !f.fail(t, "k", c.Owner) {
			t.Fatal("Fail = false")
		}
		select {
		case w := <-done:
			wantState(t, w, idempotency.Failed)
			t.Logf("woken %v after Fail", time.Since(start))
		case <-time.After(20 * time.Second):
			t.Fatal("the waiter was not woken by Fail")
		}
	})
}

// Fail answers are counted in coordination.idempotency.fails by result,
// and a failed claim's Begin in begins{state=failed}.
func TestFailMetrics(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		reader := sdkmetric.NewManualReader()
		coord := b.Coordinator(t, coordination.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))))
		store, err := idempotency.New(coord)
		if err != nil {
			t.Fatal(err)
		}
		ctx := t.Context()
		c, err := store.Begin(ctx, "k", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 { // failed, then not_owner
			if _, err := store.Fail(ctx, "k", c.Owner); err != nil {
				t.Fatal(err)
			}
		}
		if got, err := store.Begin(ctx, "k", time.Minute); err != nil || got.State != idempotency.Failed {
			t.Fatal(got, err)
		}
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(ctx, &rm); err != nil {
			t.Fatal(err)
		}
		got := map[string]int64{}
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				if m.Name != "coordination.idempotency.fails" && m.Name != "coordination.idempotency.begins" {
					continue
				}
				for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
					for _, kv := range p.Attributes.ToSlice() {
						got[m.Name+" "+kv.Value.Emit()] += p.Value
					}
				}
			}
		}
		want := map[string]int64{
			"coordination.idempotency.fails failed":    1,
			"coordination.idempotency.fails not_owner": 1,
			"coordination.idempotency.begins started":  1,
			"coordination.idempotency.begins failed":   1,
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s = %d, want %d (all: %v)", k, got[k], v, got)
			}
		}
	})
}
