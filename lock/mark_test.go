package lock_test

import (
	"context"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/fencing"
	"github.com/coordkit/coordination/internal/slot"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// A lock or fencing lease released long before its TTL leaves its release
// mark for 5 s at most (slot.MarkTTL), not for the rest of its TTL: a
// workload of long-TTL locks keeps no long-lived keys.
func TestReleaseMarkLastsFiveSecondsAtMost(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Raw(t)
		coord := b.Coordinator(t)
		check := func(what, full string) {
			t.Helper()
			mark := slot.MarkKey(b.Prefix(), full)
			d, err := raw.PTTL(ctx, mark).Result()
			if err != nil || d <= 0 || d > slot.MarkTTL*time.Millisecond {
				t.Errorf("%s: the release mark's PTTL = %v, %v; want (0, 5s]", what, d, err)
			}
		}
		l, err := tryAcquire(ctx, coord, "long", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if out, err := l.Release(ctx); out != coordination.Released || err != nil {
			t.Fatalf("Release = %v, %v", out, err)
		}
		check("lock", b.Key("long"))
		fm, err := fencing.New(coord, "{inv}:lease", "{inv}:fence")
		if err != nil {
			t.Fatal(err)
		}
		f, err := fm.TryAcquire(ctx, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if out, err := f.Release(ctx); out != coordination.Released || err != nil {
			t.Fatalf("fencing Release = %v, %v", out, err)
		}
		check("fencing lease", b.Key("{inv}:lease"))
	})
}
