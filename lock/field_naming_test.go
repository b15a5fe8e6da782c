package lock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/lock"
)

// A field lease's errors name the field after the key: a contended
// acquisition, a blocking one that gave up, and the handle's refresh,
// verify and release on a key turned into another type; on a server
// without hash-field expiration, its refusal.
func TestFieldLeaseErrorsNameTheField(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		coord := b.Coordinator(t)
		fs, err := lock.NewFieldSet(coord, "fs")
		if err != nil {
			t.Fatal(err)
		}
		if !b.HasHashFieldTTL() {
			_, err := fs.TryAcquire(ctx, "a", time.Minute)
			const want = `coordination: lease acquire "fs" field "a": `
			if !errors.Is(err, coordination.ErrUnsupportedServer) || len(err.Error()) < len(want) || err.Error()[:len(want)] != want {
				t.Fatalf("TryAcquire on %s: %v, want ErrUnsupportedServer beginning %s", b.Name, err, want)
			}
			return
		}
		l := must(fs.TryAcquire(ctx, "a", time.Minute))(t)
		_, err = fs.TryAcquire(ctx, "a", time.Minute)
		if want := `coordination: lease acquire "fs" field "a": not acquired`; !errors.Is(err, coordination.ErrNotAcquired) || err.Error() != want {
			t.Errorf("TryAcquire of a held field: %v, want ErrNotAcquired %s", err, want)
		}
		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		_, err = fs.Acquire(short, "a", time.Minute)
		cancel()
		if want := `coordination: lease acquire "fs" field "a": `; !errors.Is(err, coordination.ErrNotAcquired) || len(err.Error()) < len(want) || err.Error()[:len(want)] != want {
			t.Errorf("Acquire that gave up: %v, want ErrNotAcquired beginning %s", err, want)
		}
		raw := b.Raw(t)
		must(raw.Del(ctx, b.Key("fs")).Result())(t)
		must(raw.Set(ctx, b.Key("fs"), "v", 0).Result())(t)
		_, err = l.Refresh(ctx, time.Minute)
		if want := `coordination: lease renew "fs" field "a": key holds the wrong Redis type (COORD_WRONGTYPE)`; !errors.Is(err, coordination.ErrBadState) || err.Error() != want {
			t.Errorf("Refresh: %v, want %s", err, want)
		}
		_, err = l.Verify(ctx)
		if want := `coordination: lease verify "fs" field "a": key holds the wrong Redis type (COORD_WRONGTYPE)`; !errors.Is(err, coordination.ErrBadState) || err.Error() != want {
			t.Errorf("Verify: %v, want %s", err, want)
		}
		_, err = l.Release(ctx)
		if want := `coordination: lease release "fs" field "a": key holds the wrong Redis type (COORD_WRONGTYPE)`; !errors.Is(err, coordination.ErrBadState) || err.Error() != want {
			t.Errorf("Release: %v, want %s", err, want)
		}
	})
}
