package coordination_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/lock"
)

// KeepAliveFor renews a lease for its maximum hold, then stops: the
// context is cancelled with a cause matching ErrLost that names the
// maximum hold, the lease is not released (it ends on the server at its
// TTL) and another owner takes it after that. A Release after the bound
// still deletes the lease while this owner holds it. A non-positive
// bound is refused, naming maxHold.
func TestKeepAliveForBoundsTheHold(t *testing.T) {
	t.Parallel()
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		// A TTL long enough that renewals (every TTL/3) keep the lease on a
		// loaded machine: with 300 ms, a renewal late by ~200 ms under
		// -race let the local deadline pass first (cause: the deadline,
		// not the maximum hold).
		const ttl, maxHold = time.Second, 3 * time.Second
		coord := b.Coordinator(t)
		m, err := lock.New(coord, "bounded")
		if err != nil {
			t.Fatal(err)
		}
		l, err := m.TryAcquire(ctx, ttl)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range []time.Duration{0, -time.Second} {
			err := l.KeepAliveFor(d)
			if name, _ := check.ArgumentName(err); !errors.Is(err, coordination.ErrInvalidArgument) || name != "maxHold" {
				t.Fatalf("KeepAliveFor(%v) = %v, want ErrInvalidArgument naming maxHold", d, err)
			}
		}
		started := time.Now()
		if err := l.KeepAliveFor(maxHold); err != nil {
			t.Fatal(err)
		}
		// Renewed past several TTLs (on miniredis the clock moves only
		// when told: the key's TTL is checked instead).
		time.Sleep(2 * ttl)
		if l.Context().Err() != nil {
			t.Fatalf("the lease ended before its maximum hold: %v", context.Cause(l.Context()))
		}
		if n := b.Raw(t).Exists(ctx, b.Key("bounded")).Val(); n != 1 {
			t.Fatal("the lease was not renewed")
		}
		select {
		case <-l.Context().Done():
		case <-time.After(maxHold + 5*time.Second):
			t.Fatal("the context was not cancelled at the maximum hold")
		}
		if held := time.Since(started); held < maxHold {
			t.Fatalf("ended after %v, before the maximum hold %v", held, maxHold)
		}
		cause := context.Cause(l.Context())
		if !errors.Is(cause, coordination.ErrLost) || !strings.Contains(cause.Error(), "maximum hold (3s)") {
			t.Fatalf("cause %v, want ErrLost naming the maximum hold", cause)
		}
		// Not released: the key is there until its TTL.
		if n := b.Raw(t).Exists(ctx, b.Key("bounded")).Val(); n != 1 {
			t.Fatal("the lease was released at the maximum hold")
		}
		if b.IsMini() {
			b.Advance(ttl)
		}
		waitFor := time.Now().Add(ttl + 5*time.Second)
		var next *lock.Lock
		for next == nil {
			if time.Now().After(waitFor) {
				t.Fatal("nobody else could take the lease after its TTL")
			}
			next, err = m.TryAcquire(ctx, time.Minute)
			if errors.Is(err, coordination.ErrNotAcquired) {
				next, err = nil, nil
				time.Sleep(20 * time.Millisecond)
			} else if err != nil {
				t.Fatal(err)
			}
		}
		if _, err := next.Release(ctx); err != nil {
			t.Fatal(err)
		}

		// A Release after the bound, while the key is still ours, deletes it.
		l2, err := m.TryAcquire(ctx, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if err := l2.KeepAliveFor(50 * time.Millisecond); err != nil {
			t.Fatal(err)
		}
		<-l2.Context().Done()
		if out, err := l2.Release(ctx); err != nil || out != coordination.Released {
			t.Fatalf("Release after the maximum hold = %v, %v; want Released", out, err)
		}
		if n := b.Raw(t).Exists(ctx, b.Key("bounded")).Val(); n != 0 {
			t.Fatal("Release after the maximum hold left the key")
		}

	})
}
