package fencing_test

import (
	"context"
	"errors"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/fencing"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// A counter the acquisition refuses (a list instead of a string, a TTL, an
// overflow) is named in the error: the counter key, not the lease key,
// with nothing written. The lease key of the wrong type is named as the
// lease key.
func TestFencingCounterErrorsNameTheCounter(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		coord := b.Coordinator(t)
		raw := b.Raw(t)
		m, err := fencing.New(coord, "{c4}", "{c4}:f")
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			name, want string
			seed       func() error
		}{
			{"list", `coordination: fenced lock acquire "{c4}:f": counter key holds the wrong Redis type, not a string (COORD_BADCOUNTER)`,
				func() error { return raw.RPush(ctx, b.Key("{c4}:f"), "x").Err() }},
			{"ttl", `coordination: fenced lock acquire "{c4}:f": counter key has a TTL; it must never expire (COORD_BADCOUNTER)`,
				func() error { return raw.Set(ctx, b.Key("{c4}:f"), "7", time.Hour).Err() }},
			{"overflow", `coordination: fenced lock acquire "{c4}:f": counter is at 9223372036854775807 (COORD_OVERFLOW)`,
				func() error { return raw.Set(ctx, b.Key("{c4}:f"), "9223372036854775807", 0).Err() }},
		} {
			if err := raw.Del(ctx, b.Key("{c4}"), b.Key("{c4}:f")).Err(); err != nil {
				t.Fatal(err)
			}
			if err := c.seed(); err != nil {
				t.Fatal(err)
			}
			_, err := m.TryAcquire(ctx, time.Minute)
			if !errors.Is(err, coordination.ErrBadState) || err.Error() != c.want {
				t.Errorf("%s: TryAcquire: %v\nwant ErrBadState %s", c.name, err, c.want)
			}
			if n, err := raw.Exists(ctx, b.Key("{c4}")).Result(); err != nil || n != 0 {
				t.Errorf("%s: the lease key was written: %d %v", c.name, n, err)
			}
		}
		// The lease key of the wrong type stays the lease key's error.
		if err := raw.Del(ctx, b.Key("{c4}:f")).Err(); err != nil {
			t.Fatal(err)
		}
		if err := raw.RPush(ctx, b.Key("{c4}"), "x").Err(); err != nil {
			t.Fatal(err)
		}
		_, err = m.TryAcquire(ctx, time.Minute)
		if want := `coordination: fenced lock acquire "{c4}": key holds the wrong Redis type (COORD_WRONGTYPE)`; !errors.Is(err, coordination.ErrBadState) || err.Error() != want {
			t.Errorf("lease key a list: TryAcquire: %v\nwant %s", err, want)
		}
		if n, err := raw.Exists(ctx, b.Key("{c4}:f")).Result(); err != nil || n != 0 {
			t.Errorf("the counter was written: %d %v", n, err)
		}
	})
}
