package semaphore

import (
	"context"
	"testing"
	"time"

	"github.com/coordkit/coordination/internal/decode"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// At the script level (below the handle, which refuses locally once its
// deadline passed), an expired holder's refresh and release find nothing
// and leave the next holder's permit as it was.
func TestExpiredMemberScriptsTouchNothing(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		s, err := New(b.Coordinator(t), "permits", 1)
		if err != nil {
			t.Fatal(err)
		}
		e, k := s.e, s.keys
		g, err := acquireScript.Run(ctx, e, k, "P:1:old", 100, int64(1))
		if err != nil || !g.Acquired {
			t.Fatalf("old acquire: %+v, %v", g, err)
		}
		b.Advance(200 * time.Millisecond)
		if g, err = acquireScript.Run(ctx, e, k, "P:1:new", 60_000, int64(1)); err != nil || !g.Acquired {
			t.Fatalf("new acquire: %+v, %v", g, err)
		}
		raw := b.Raw(t)
		score := func() float64 {
			v, err := raw.ZScore(ctx, b.Key("permits"), "P:1:new").Result()
			if err != nil {
				t.Fatalf("ZSCORE: %v", err)
			}
			return v
		}
		before := score()
		if ok, err := refreshScript.Run(ctx, e, k, "P:1:old", 60_000); ok || err != nil {
			t.Fatalf("refresh of the expired member = %v, %v", ok, err)
		}
		if out, err := releaseScript.Run(ctx, e, k, "P:1:old"); out != decode.AlreadyReleased || err != nil {
			t.Fatalf("release of the expired member = %v, %v", out, err)
		}
		if ok, err := verifyScript.Run(ctx, e, k, "P:1:new"); !ok || err != nil || score() != before {
			t.Fatalf("the new holder's permit changed: live %v (%v), score %v -> %v", ok, err, before, score())
		}
		// A re-sent acquisition of the live holder does not take a second
		// permit and only sets its expiry again.
		if g, err = acquireScript.Run(ctx, e, k, "P:1:new", 60_000, int64(1)); err != nil || !g.Acquired {
			t.Fatalf("re-sent acquire: %+v, %v", g, err)
		}
		if n, _ := raw.ZCard(ctx, b.Key("permits")).Result(); n != 2 {
			t.Fatalf("ZCARD = %d after a re-sent acquire; want the capacity record and one permit", n)
		}
	})
}
