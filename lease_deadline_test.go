package coordination_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/coordkit/coordination/fencing"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/ratelimit"
	"github.com/coordkit/coordination/rwlease"
	"github.com/coordkit/coordination/semaphore"
)

// heldLease is what every held lease of the library has in common.
type heldLease interface {
	Context() context.Context
	Remaining() time.Duration
	Refresh(ctx context.Context, ttl time.Duration) (bool, error)
}

// Every held lease's Context carries its local deadline: a client given
// the context (a database driver, an HTTP client) bounds its own request
// by the lease. The deadline moves with a renewal; a lease without expiry
// has none; a released lease's context is done.
func TestLeaseContextCarriesLocalDeadline(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		coord := b.Coordinator(t)
		const ttl = 20 * time.Second
		acquire := map[string]func() (heldLease, func() error, error){
			"lock": func() (heldLease, func() error, error) {
				l, err := lockTryAcquire(ctx, coord, "dl:lock", ttl)
				return l, func() error { _, err := l.Release(ctx); return err }, err
			},
			"fencing": func() (heldLease, func() error, error) {
				m, err := fencing.New(coord, "{dl}:lease", "{dl}:fence")
				if err != nil {
					return nil, nil, err
				}
				l, err := m.TryAcquire(ctx, ttl)
				return l, func() error { _, err := l.Release(ctx); return err }, err
			},
			"rwlease": func() (heldLease, func() error, error) {
				m, err := rwlease.New(coord, "dl:rw")
				if err != nil {
					return nil, nil, err
				}
				l, err := m.TryRead(ctx, ttl)
				return l, func() error { _, err := l.Release(ctx); return err }, err
			},
			"semaphore": func() (heldLease, func() error, error) {
				s, err := semaphore.New(coord, "dl:sem", 2)
				if err != nil {
					return nil, nil, err
				}
				p, err := s.TryAcquire(ctx, ttl)
				return p, func() error { _, err := p.Release(ctx); return err }, err
			},
		}
		if b.HasHashFieldTTL() {
			acquire["field lease"] = func() (heldLease, func() error, error) {
				l, err := lockTryAcquireField(ctx, coord, "dl:fields", "f", ttl)
				return l, func() error { _, err := l.Release(ctx); return err }, err
			}
		}
		for name, acq := range acquire {
			t.Run(name, func(t *testing.T) {
				before := time.Now()
				l, release, err := acq()
				if err != nil {
					t.Fatal(err)
				}
				dl, ok := l.Context().Deadline()
				if !ok {
					t.Fatal("the context of a lease with a TTL has no deadline")
				}
				// The local deadline: before + ttl minus the drift allowance
				// (1% + 2 ms), never past before + ttl.
				if dl.After(before.Add(ttl)) || dl.Before(before.Add(ttl-ttl/100-2*time.Millisecond)) {
					t.Fatalf("deadline %v after the request, want within the drift of %v", dl.Sub(before), ttl)
				}
				if left := time.Until(dl); left < l.Remaining()-time.Millisecond || left > ttl {
					t.Fatalf("deadline in %v, Remaining %v", left, l.Remaining())
				}
				// A derived context keeps the lease's earlier deadline.
				sub, cancel := context.WithTimeout(l.Context(), time.Hour)
				defer cancel()
				if got, _ := sub.Deadline(); !got.Equal(dl) {
					t.Fatalf("derived context's deadline %v, want the lease's %v", got, dl)
				}
				if ok, err := l.Refresh(ctx, 2*ttl); err != nil || !ok {
					t.Fatalf("Refresh = %v, %v", ok, err)
				}
				if dl2, _ := l.Context().Deadline(); !dl2.After(dl.Add(ttl / 2)) {
					t.Fatalf("after a refresh to %v the deadline moved from %v to %v", 2*ttl, dl, dl2)
				}
				if err := release(); err != nil {
					t.Fatal(err)
				}
				if err := l.Context().Err(); !errors.Is(err, context.Canceled) {
					t.Fatalf("released lease's context: %v", err)
				}
			})
		}
		t.Run("concurrency limiter", func(t *testing.T) {
			lim, err := ratelimit.NewConcurrency(coord, "dl:conc", 1, ratelimit.WithLeaseDuration(ttl))
			if err != nil {
				t.Fatal(err)
			}
			defer lim.Close()
			before := time.Now()
			l, err := lim.TryAcquire(ctx, 1)
			if err != nil {
				t.Fatalf("TryAcquire: %v", err)
			}
			dl, ok := l.Context().Deadline()
			if !ok || dl.After(before.Add(ttl)) || dl.Before(before.Add(ttl-ttl/100-2*time.Millisecond)) {
				t.Fatalf("concurrency lease deadline %v (%v) after the request, want about %v", dl.Sub(before), ok, ttl)
			}
			if _, err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		})
	})
}
