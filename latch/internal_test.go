package latch

import (
	"context"
	"testing"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// A count-down or create re-sent with the same ids (as go-redis does after
// a lost reply) takes effect once.
func TestResentRequestsCountOnce(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		coord := b.Coordinator(t)
		e, err := engine.Of(coord)
		if err != nil {
			t.Fatal(err)
		}
		l, err := mustNewLatch(t, coord, "latch").Create(ctx, 3)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			r, err := countDownScript.Run(ctx, e, e.Key("latch"), l.id, "signal-1")
			if err != nil || r.Status != statusCurrent || r.Remaining != 2 {
				t.Fatalf("count-down (re-sent) = %+v, %v; want counted once, 2 left", r, err)
			}
		}
		if n, err := l.Count(ctx); n != 2 || err != nil {
			t.Fatalf("Count = %d, %v; want 2", n, err)
		}
		for range 2 {
			r, err := createScript.Run(ctx, e, e.Key("latch"), "gen-2", 5, 0, 0, "reset")
			if err != nil || !r.Created || r.Gen != 2 || r.Count != 5 {
				t.Fatalf("reset (re-sent) = %+v, %v; want generation 2 of count 5 once", r, err)
			}
		}
		// The reset dropped the old generation's count-down records.
		fields, err := b.Raw(t).HKeys(ctx, b.Key("latch")).Result()
		if err != nil || len(fields) != 5 {
			t.Fatalf("fields after reset = %v, %v; want id, gen, count, initial, deadline", fields, err)
		}
	})
}

func mustNewLatch(t testing.TB, coord *coordination.Coordinator, k string) *Latch {
	t.Helper()
	l, err := New(coord, k)
	if err != nil {
		t.Fatal(err)
	}
	return l
}
