package lock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/lock"
)

// New sends nothing; one Mutex serves many acquisitions, each with a handle
// and an owner token of its own, and competing goroutines sharing it get
// the lock once.
func TestMutexServesManyAcquisitions(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		coord := b.Coordinator(t)
		counter := testharness.CountCommands(coord.Client())
		m := must(lock.New(coord, "many"))(t)
		if n := counter.Count(); n != 0 {
			t.Fatalf("New sent %v", counter.Names())
		}
		if m.Key() != "many" {
			t.Fatalf("Key() = %q, want %q", m.Key(), "many")
		}
		first := must(m.TryAcquire(ctx, time.Minute))(t)
		if _, err := m.TryAcquire(ctx, time.Minute); !errors.Is(err, coordination.ErrNotAcquired) {
			t.Fatalf("second TryAcquire on the same Mutex: %v, want ErrNotAcquired", err)
		}
		if out, err := first.Release(ctx); err != nil || out != coordination.Released {
			t.Fatalf("release: %v, %v", out, err)
		}
		second := must(m.TryAcquire(ctx, time.Minute))(t)
		if second.Token() == first.Token() || second.Key() != "many" {
			t.Fatalf("second handle: token %q (first %q), key %q; want a new token on %q", second.Token(), first.Token(), second.Key(), "many")
		}
		if ok, err := first.Verify(ctx); err != nil || ok {
			t.Fatalf("released handle's Verify: %v, %v; want false", ok, err)
		}
		if _, err := second.Release(ctx); err != nil {
			t.Fatal(err)
		}

		var wg sync.WaitGroup
		var mu sync.Mutex
		var won []*lock.Lock
		for range 8 {
			wg.Go(func() {
				l, err := m.TryAcquire(ctx, time.Minute)
				if err != nil && !errors.Is(err, coordination.ErrNotAcquired) {
					t.Error(err)
				}
				if err == nil {
					mu.Lock()
					won = append(won, l)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if len(won) != 1 {
			t.Fatalf("%d goroutines sharing one Mutex acquired it, want 1", len(won))
		}
		if _, err := won[0].Release(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// NewFieldSet sends nothing; one FieldSet serves leases on many fields
// (each a lease of its own) and many acquisitions of one field.
func TestFieldSetServesManyFields(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		coord := b.Coordinator(t)
		counter := testharness.CountCommands(coord.Client())
		s := must(lock.NewFieldSet(coord, "pool"))(t)
		if n := counter.Count(); n != 0 {
			t.Fatalf("NewFieldSet sent %v", counter.Names())
		}
		if s.Key() != "pool" {
			t.Fatalf("Key() = %q, want %q", s.Key(), "pool")
		}
		a := must(s.TryAcquire(ctx, "a", time.Minute))(t)
		c := must(s.TryAcquire(ctx, "c", time.Minute))(t)
		if a.Field() != "a" || c.Field() != "c" || a.Key() != "pool" || a.Token() == c.Token() {
			t.Fatalf("leases: %q/%q on %q, tokens %q %q", a.Field(), c.Field(), a.Key(), a.Token(), c.Token())
		}
		if _, err := s.TryAcquire(ctx, "a", time.Minute); !errors.Is(err, coordination.ErrNotAcquired) {
			t.Fatalf("second TryAcquire of field a: %v, want ErrNotAcquired", err)
		}
		if _, err := a.Release(ctx); err != nil {
			t.Fatal(err)
		}
		again := must(s.TryAcquire(ctx, "a", time.Minute))(t)
		if again.Token() == a.Token() {
			t.Fatal("a new acquisition reused the released handle's token")
		}
		for _, l := range []*lock.FieldLease{again, c} {
			if _, err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}, testharness.HashFieldTTLOnly())
}

// A nil Mutex or FieldSet reports an empty key.
func TestNilKeys(t *testing.T) {
	var m *lock.Mutex
	var s *lock.FieldSet
	if m.Key() != "" || s.Key() != "" {
		t.Fatalf("nil keys: %q %q", m.Key(), s.Key())
	}
}
