package fencing_test

import (
	"context"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/fencing"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// Each operation re-sent by go-redis after a lost reply reports what its
// first send did: a re-sent TryAcquire returns the fencing token the first
// send drew (the counter moves once), a re-sent refresh and verify report
// true, a re-sent Guarded.Set reports accepted, a re-sent release Released.
func TestReSentOperationsReportTheFirstOutcome(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		coord, hook := b.Resending(t)
		raw := b.Client(t)
		resent := func(what string) {
			t.Helper()
			if n, _ := hook.Sent(); n != 2 {
				t.Fatalf("%s: sent %d times, want 2", what, n)
			}
		}
		m, err := fencing.New(coord, "{r}:lease", "{r}:fence")
		if err != nil {
			t.Fatal(err)
		}
		res, err := fencing.NewGuarded(coord, "res")
		if err != nil {
			t.Fatal(err)
		}
		for i := range 2 { // the first round loads the scripts
			hook.Arm()
			l, err := m.TryAcquire(ctx, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			resent("TryAcquire")
			if c, err := counterOf(ctx, raw, b, "{r}:fence").Int64(); err != nil || c != int64(i+1) || l.FencingToken() != c {
				t.Fatalf("token %d, counter %d (%v); want both %d", l.FencingToken(), c, err, i+1)
			}
			hook.Arm()
			if ok, err := l.Refresh(ctx, time.Minute); err != nil || !ok {
				t.Fatalf("re-sent Refresh = %v, %v", ok, err)
			}
			resent("Refresh")
			hook.Arm()
			if ok, err := l.Verify(ctx); err != nil || !ok {
				t.Fatalf("re-sent Verify = %v, %v", ok, err)
			}
			resent("Verify")
			hook.Arm()
			if ok, cur, err := res.Set(ctx, l.FencingToken(), []byte("v"), time.Minute); err != nil || !ok || cur != l.FencingToken() {
				t.Fatalf("re-sent Guarded.Set = %v, %d, %v", ok, cur, err)
			}
			resent("Guarded.Set")
			hook.Arm()
			if out, err := l.Release(ctx); err != nil || out != coordination.Released {
				t.Fatalf("re-sent Release = %v, %v; want Released", out, err)
			}
			resent("Release")
		}
	})
}
