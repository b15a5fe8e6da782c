package fencing_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/fencing"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// A lease hash held by another owner without a TTL (PERSISTed, or RESTOREd
// without one) would never be left: TryAcquire and Acquire return a
// terminal ErrBadState naming the operation and key, at once, and write
// nothing (before, TryAcquire answered ErrNotAcquired and Acquire waited
// until ctx ended, as did a leader campaigning on the key).
func TestFencingLeaseWithoutTTLIsBadState(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Raw(t)
		m, err := fencing.New(b.Coordinator(t), "{p}:lease", "{p}:fence")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.TryAcquire(ctx, time.Minute); err != nil {
			t.Fatal(err)
		}
		if err := raw.Persist(ctx, b.Key("{p}:lease")).Err(); err != nil {
			t.Fatal(err)
		}
		before, err := raw.HGetAll(ctx, b.Key("{p}:lease")).Result()
		if err != nil {
			t.Fatal(err)
		}
		other, err := fencing.New(b.Coordinator(t), "{p}:lease", "{p}:fence")
		if err != nil {
			t.Fatal(err)
		}
		check := func(what string, err error) {
			t.Helper()
			if !errors.Is(err, coordination.ErrBadState) || errors.Is(err, coordination.ErrNotAcquired) ||
				engine.Classify(err) != engine.Terminal || !strings.Contains(err.Error(), `"{p}:lease"`) {
				t.Errorf("%s: %v, want a terminal ErrBadState naming the lease key", what, err)
			}
			after, herr := raw.HGetAll(ctx, b.Key("{p}:lease")).Result()
			ttl, terr := raw.PTTL(ctx, b.Key("{p}:lease")).Result()
			if herr != nil || terr != nil || len(after) != len(before) || after["fence"] != before["fence"] || after["owner"] != before["owner"] || ttl != -1 {
				t.Errorf("after %s the lease is %v (TTL %v; %v %v), want %v unchanged without a TTL", what, after, ttl, herr, terr, before)
			}
			if v, err := counterOf(ctx, raw, b, "{p}:fence").Result(); err != nil || v != "1" {
				t.Errorf("after %s the counter is %q (%v), want 1", what, v, err)
			}
		}
		_, err = other.TryAcquire(ctx, time.Minute)
		check("TryAcquire", err)
		actx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		_, err = other.Acquire(actx, time.Minute)
		if actx.Err() != nil {
			t.Errorf("Acquire waited until its context ended")
		}
		check("Acquire", err)
	})
}
