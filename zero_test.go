package coordination_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/coordkit/coordination/internal/engine"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/fencing"
	"github.com/coordkit/coordination/idempotency"
	"github.com/coordkit/coordination/latch"
	"github.com/coordkit/coordination/leader"
	"github.com/coordkit/coordination/lock"
	"github.com/coordkit/coordination/ratelimit"
	"github.com/coordkit/coordination/redlock"
	"github.com/coordkit/coordination/rwlease"
	"github.com/coordkit/coordination/semaphore"
)

// The verbs of a zero value or a nil pointer of every public primitive
// type return an error wrapping ErrInvalidArgument that names what is
// missing, never a panic (a zero redlock.Group panicked with an index out
// of range).
func TestZeroAndNilPrimitivesRefuse(t *testing.T) {
	ctx := context.Background()
	ttl := time.Minute
	type call struct {
		name string
		f    func() error
	}
	var calls []call
	add := func(name string, f func() error) { calls = append(calls, call{name, f}) }
	for _, g := range []*redlock.Group{new(redlock.Group), nil} {
		add(fmt.Sprintf("redlock.Group(%v).TryAcquire", g == nil), func() error { _, err := g.TryAcquire(ctx, "k", ttl); return err })
		add(fmt.Sprintf("redlock.Group(%v).Acquire", g == nil), func() error { _, err := g.Acquire(ctx, "k", ttl); return err })
		add(fmt.Sprintf("redlock.Group(%v).Adopt", g == nil), func() error { _, err := g.Adopt(ctx, "k", "tok"); return err })
		add(fmt.Sprintf("redlock.Group(%v).Holder", g == nil), func() error { _, err := g.Holder(ctx, "k"); return err })
		add(fmt.Sprintf("redlock.Group(%v).ForceRelease", g == nil), func() error { _, err := g.ForceRelease(ctx, "k", "tok"); return err })
	}
	for _, m := range []*lock.Mutex{new(lock.Mutex), nil} {
		add("lock.Mutex.TryAcquire", func() error { _, err := m.TryAcquire(ctx, ttl); return err })
		add("lock.Mutex.Acquire", func() error { _, err := m.Acquire(ctx, ttl); return err })
		add("lock.Mutex.Adopt", func() error { _, err := m.Adopt(ctx, "tok"); return err })
		add("lock.Mutex.Holder", func() error { _, err := m.Holder(ctx); return err })
		add("lock.Mutex.ForceRelease", func() error { _, err := m.ForceRelease(ctx, "tok"); return err })
	}
	for _, s := range []*lock.FieldSet{new(lock.FieldSet), nil} {
		add("lock.FieldSet.TryAcquire", func() error { _, err := s.TryAcquire(ctx, "f", ttl); return err })
		add("lock.FieldSet.Adopt", func() error { _, err := s.Adopt(ctx, "f", "tok"); return err })
		add("lock.FieldSet.Holder", func() error { _, err := s.Holder(ctx, "f"); return err })
		add("lock.FieldSet.ForceRelease", func() error { _, err := s.ForceRelease(ctx, "f", "tok"); return err })
	}
	for _, m := range []*fencing.Mutex{new(fencing.Mutex), nil} {
		add("fencing.Mutex.TryAcquire", func() error { _, err := m.TryAcquire(ctx, ttl); return err })
		add("fencing.Mutex.Adopt", func() error { _, err := m.Adopt(ctx, "tok"); return err })
		add("fencing.Mutex.Holder", func() error { _, err := m.Holder(ctx); return err })
		add("fencing.Mutex.ForceRelease", func() error { _, err := m.ForceRelease(ctx, "tok"); return err })
	}
	for _, g := range []*fencing.Guarded{new(fencing.Guarded), nil} {
		add("fencing.Guarded.Get", func() error { _, _, _, err := g.Get(ctx); return err })
		add("fencing.Guarded.Set", func() error { _, _, err := g.Set(ctx, 1, nil, ttl); return err })
	}
	for _, m := range []*rwlease.RWMutex{new(rwlease.RWMutex), nil} {
		add("rwlease.RWMutex.TryRead", func() error { _, err := m.TryRead(ctx, ttl); return err })
		add("rwlease.RWMutex.TryWrite", func() error { _, err := m.TryWrite(ctx, ttl); return err })
		add("rwlease.RWMutex.Adopt", func() error { _, err := m.Adopt(ctx, "tok"); return err })
		add("rwlease.RWMutex.Holders", func() error { _, err := m.Holders(ctx); return err })
		add("rwlease.RWMutex.ForceRelease", func() error { _, err := m.ForceRelease(ctx, "tok"); return err })
	}
	for _, s := range []*semaphore.Semaphore{new(semaphore.Semaphore), nil} {
		add("semaphore.TryAcquire", func() error { _, err := s.TryAcquire(ctx, ttl); return err })
		add("semaphore.State", func() error { _, err := s.State(ctx); return err })
		add("semaphore.Adopt", func() error { _, err := s.Adopt(ctx, "tok"); return err })
		add("semaphore.Holders", func() error { _, err := s.Holders(ctx); return err })
		add("semaphore.ForceRelease", func() error { _, err := s.ForceRelease(ctx, "tok"); return err })
	}
	for _, l := range []*latch.Latch{new(latch.Latch), nil} {
		add("latch.Create", func() error { _, err := l.Create(ctx, 1); return err })
		add("latch.Join", func() error { _, err := l.Join(ctx); return err })
	}
	for _, g := range []*latch.Generation{new(latch.Generation), nil} {
		add("latch.Generation.CountDown", func() error { _, err := g.CountDown(ctx); return err })
		add("latch.Generation.Count", func() error { _, err := g.Count(ctx); return err })
	}
	for _, e := range []*leader.Elector{new(leader.Elector), nil} {
		add("leader.Run", func() error { return e.Run(ctx) })
		add("leader.Leader", func() error { _, err := e.Leader(ctx); return err })
	}
	for _, s := range []*idempotency.Store{new(idempotency.Store), nil} {
		add("idempotency.Begin", func() error { _, err := s.Begin(ctx, "k", ttl); return err })
	}
	for _, l := range []*ratelimit.Limiter{new(ratelimit.Limiter), nil} {
		add("ratelimit.Allow", func() error { _, err := l.Allow(ctx, 1); return err })
		add("ratelimit.Wait", func() error { _, err := l.Wait(ctx, 1); return err })
	}
	for _, c := range []*ratelimit.ConcurrencyLimiter{new(ratelimit.ConcurrencyLimiter), nil} {
		add("ratelimit.ConcurrencyLimiter.Adopt", func() error { _, err := c.Adopt(ctx, "tok"); return err })
		add("ratelimit.ConcurrencyLimiter.Holders", func() error { _, err := c.Holders(ctx); return err })
		add("ratelimit.ConcurrencyLimiter.ForceRelease", func() error { _, err := c.ForceRelease(ctx, "tok"); return err })
	}
	for _, c := range calls {
		var err error
		func() {
			defer func() {
				if r := recover(); r != nil {
					err = fmt.Errorf("panic: %v", r)
				}
			}()
			err = c.f()
		}()
		if !errors.Is(err, coordination.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument naming what is missing", c.name, err)
		}
	}
}

// A zero Coordinator (not built by coordination.New) is refused by every
// constructor and by Shutdown with an error naming coord and saying to
// use coordination.New; its accessors answer without a panic (Client and
// Prefix dereferenced a nil engine).
func TestZeroCoordinatorRefused(t *testing.T) {
	var zero coordination.Coordinator
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("accessor of a zero Coordinator panicked: %v", r)
			}
		}()
		if c := zero.Client(); c != nil {
			t.Errorf("zero Coordinator's Client() = %v, want nil", c)
		}
	}()
	const want = `invalid argument coord: must not be nil or a zero Coordinator; use coordination.New`
	_, err := lock.New(&zero, "k")
	if !errors.Is(err, coordination.ErrInvalidArgument) || !strings.Contains(err.Error(), want) {
		t.Errorf("lock.New(zero Coordinator) = %v, want ErrInvalidArgument containing %q", err, want)
	}
	if err := zero.Shutdown(context.Background()); !errors.Is(err, coordination.ErrInvalidArgument) || !strings.Contains(err.Error(), want) {
		t.Errorf("zero Coordinator's Shutdown = %v, want ErrInvalidArgument containing %q", err, want)
	}
}

// WithKeyPrefix is bounded: New refuses a prefix over 256 bytes, naming
// prefix, and accepts one of exactly 256 (a 5000-byte prefix was accepted).
func TestKeyPrefixBounded(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled: New does no I/O
	defer client.Close()
	_, err := coordination.New(client, coordination.WithKeyPrefix(strings.Repeat("p", 257)))
	if want := "invalid argument prefix: is 257 bytes long; at most 256 are allowed"; !errors.Is(err, coordination.ErrInvalidArgument) || !strings.Contains(err.Error(), want) {
		t.Errorf("New(WithKeyPrefix(257 bytes)) = %v, want ErrInvalidArgument containing %q", err, want)
	}
	c, err := coordination.New(client, coordination.WithKeyPrefix(strings.Repeat("p", 256)))
	if err != nil {
		t.Fatalf("New(WithKeyPrefix(256 bytes)) = %v, want a coordinator", err)
	}
	e, err := engine.Of(c)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(e.Prefix()); got != 256 {
		t.Errorf("the prefix is %d bytes, want 256", got)
	}
	if err := c.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}
