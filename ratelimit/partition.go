package ratelimit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"sync"
	"time"

	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/sentinel"
)

// PartitionKey returns a limiter key for one partition of a policy: base,
// a colon, and the first 32 hex digits (128 bits) of the SHA-256 of
// partition. Hashing keeps client identifiers, IP addresses and tenant
// names out of Redis key names, bounds the key length, and rules out
// collisions through separators inside partition strings.
func PartitionKey(base, partition string) string {
	sum := sha256.Sum256([]byte(partition))
	return base + ":" + hex.EncodeToString(sum[:16])
}

// DefaultIdleTimeout is how long a [Partitioned] keeps an unused
// partition's limiter when no [WithIdleTimeout] is given.
const DefaultIdleTimeout = time.Minute

// PartitionOption configures a [Partitioned] or a
// [PartitionedConcurrency].
type PartitionOption func(*partitionConfig) error

type partitionConfig struct {
	idle time.Duration
}

// WithIdleTimeout sets how long a partition's limiter may stay unused
// before it is closed and forgotten (its Redis state is kept and picked up
// again by the next limiter of that partition). A limiter with calls in
// progress, queued waiters or held concurrency leases is never evicted.
// d must be at least 1 ms (else an error naming "idleTimeout"). The default
// is [DefaultIdleTimeout].
func WithIdleTimeout(d time.Duration) PartitionOption {
	return check.AtLeast("idleTimeout", d, time.Millisecond, func(p *partitionConfig) { p.idle = d })
}

// Partitioned keeps one [Limiter] per partition (a client, tenant or user),
// created on first use by a factory and evicted after it has been idle.
// Eviction is done by the calls themselves (no background goroutine): at
// most every half idle timeout, a call closes the limiters idle longer than
// the timeout.
//
// Every partition string creates state: derive partitions from
// authenticated identities or normalized addresses, never from raw
// attacker-controlled input (headers, query strings, API keys).
//
// A Partitioned is safe for concurrent use by multiple goroutines. The zero
// value is not usable; use [NewPartitioned].
type Partitioned struct {
	p partitions[*Limiter]
}

// PartitionedConcurrency keeps one [ConcurrencyLimiter] per partition, as
// [Partitioned] does for consumptive limiters: created on first use by a
// factory, evicted after it has been idle (never while it holds leases).
// The same warning applies: derive partitions from authenticated
// identities or normalized addresses.
//
// A PartitionedConcurrency is safe for concurrent use by multiple
// goroutines. The zero value is not usable; use
// [NewPartitionedConcurrency].
type PartitionedConcurrency struct {
	p partitions[*ConcurrencyLimiter]
}

// partitionable is a limiter a partitions keeps.
type partitionable interface {
	comparable
	busy() bool
	Close() error
}

// partitions is the machinery of Partitioned and PartitionedConcurrency.
type partitions[L partitionable] struct {
	factory func(partition string) (L, error)
	idle    time.Duration

	mu        sync.Mutex
	closed    bool
	m         map[string]*partitionEntry[L]
	lastSweep time.Time
}

type partitionEntry[L partitionable] struct {
	lim  L
	last time.Time
	uses int
}

func (p *partitions[L]) init(factory func(string) (L, error), opts []PartitionOption) error {
	if factory == nil {
		return check.InvalidArgument("factory", "must not be nil")
	}
	cfg := partitionConfig{idle: DefaultIdleTimeout}
	if err := check.Apply(&cfg, opts); err != nil {
		return err
	}
	p.factory, p.idle, p.m, p.lastSweep = factory, cfg.idle, map[string]*partitionEntry[L]{}, time.Now()
	return nil
}

// NewPartitioned returns a partitioned limiter whose factory builds the
// limiter of a partition, typically with [PartitionKey]:
//
//	p, err := ratelimit.NewPartitioned(func(client string) (*ratelimit.Limiter, error) {
//		return ratelimit.New(coord, ratelimit.PartitionKey("limits:client", client), bucket)
//	})
//
// The factory is called with the partitioned limiter's lock held and must
// not call back into it; it should not do I/O (the constructors of this
// package do none); a nil limiter with a nil error is an error naming
// "factory" at the call that needed it. Errors: coordination.ErrInvalidArgument
// naming "factory" (nil) or the invalid option's.
func NewPartitioned(factory func(partition string) (*Limiter, error), opts ...PartitionOption) (*Partitioned, error) {
	p := &Partitioned{}
	if err := p.p.init(factory, opts); err != nil {
		return nil, err
	}
	return p, nil
}

// NewPartitionedConcurrency returns a partitioned concurrency limiter
// whose factory builds the limiter of a partition, typically with
// [PartitionKey] and [NewConcurrency]. The factory's rules and the errors
// are [NewPartitioned]'s.
func NewPartitionedConcurrency(factory func(partition string) (*ConcurrencyLimiter, error), opts ...PartitionOption) (*PartitionedConcurrency, error) {
	p := &PartitionedConcurrency{}
	if err := p.p.init(factory, opts); err != nil {
		return nil, err
	}
	return p, nil
}

// TryAcquire calls [ConcurrencyLimiter.TryAcquire] on partition's limiter,
// creating it first when needed. Errors are those of TryAcquire, the
// factory's error, or coordination.ErrClosed after Close.
func (p *PartitionedConcurrency) TryAcquire(ctx context.Context, partition string, permits int) (*ConcurrencyLease, error) {
	e, err := p.p.get(partition)
	if err != nil {
		return nil, err
	}
	defer p.p.put(e)
	return e.lim.TryAcquire(ctx, permits)
}

// Acquire calls [ConcurrencyLimiter.Acquire] on partition's limiter,
// creating it first when needed. Errors are those of Acquire, the
// factory's error, or coordination.ErrClosed after Close.
func (p *PartitionedConcurrency) Acquire(ctx context.Context, partition string, permits int) (*ConcurrencyLease, error) {
	e, err := p.p.get(partition)
	if err != nil {
		return nil, err
	}
	defer p.p.put(e)
	return e.lim.Acquire(ctx, permits)
}

// busy reports whether the limiter has calls in progress, queued waiters
// or held leases.
func (c *ConcurrencyLimiter) busy() bool { return c.l.busy() }

// Allow calls [Limiter.Allow] on partition's limiter, creating it first
// when needed. Errors are those of Allow, the factory's error, or
// coordination.ErrClosed after Close.
func (p *Partitioned) Allow(ctx context.Context, partition string, permits int) (Decision, error) {
	e, err := p.p.get(partition)
	if err != nil {
		return Decision{}, err
	}
	defer p.p.put(e)
	return e.lim.Allow(ctx, permits)
}

// Wait calls [Limiter.Wait] on partition's limiter, creating it first when
// needed. Errors are those of Wait, the factory's error, or
// coordination.ErrClosed after Close.
func (p *Partitioned) Wait(ctx context.Context, partition string, permits int) (Decision, error) {
	e, err := p.p.get(partition)
	if err != nil {
		return Decision{}, err
	}
	defer p.p.put(e)
	return e.lim.Wait(ctx, permits)
}

// with runs f on partition's limiter.
func (p *partitions[L]) with(partition string, f func(L) (result, error)) (result, error) {
	e, err := p.get(partition)
	if err != nil {
		return result{}, err
	}
	defer p.put(e)
	return f(e.lim)
}

// Len returns the number of partitions with a live limiter.
func (p *Partitioned) Len() int { return p.p.len() }

// Close closes every partition's limiter (see [Limiter.Close]) and makes
// later calls fail with coordination.ErrClosed. It is idempotent and
// returns nil.
func (p *Partitioned) Close() error {
	if p == nil {
		return nil
	}
	return p.p.close()
}

// Len returns the number of partitions with a live limiter.
func (p *PartitionedConcurrency) Len() int { return p.p.len() }

// Close closes every partition's limiter (see [ConcurrencyLimiter.Close])
// and makes later calls fail with coordination.ErrClosed. It is idempotent
// and returns nil.
func (p *PartitionedConcurrency) Close() error {
	if p == nil {
		return nil
	}
	return p.p.close()
}

func (p *partitions[L]) len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.m)
}

func (p *partitions[L]) close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	m := p.m
	p.m = nil
	p.mu.Unlock()
	for _, e := range m {
		_ = e.lim.Close()
	}
	return nil
}

func (p *partitions[L]) get(partition string) (*partitionEntry[L], error) {
	now := time.Now()
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, sentinel.ErrClosed
	}
	var evicted []L
	if now.Sub(p.lastSweep) >= p.idle/2 {
		p.lastSweep = now
		evicted = p.sweepLocked(now)
	}
	e := p.m[partition]
	if e == nil {
		lim, err := p.factory(partition)
		var zero L
		if err == nil && lim == zero {
			err = check.InvalidArgument("factory", "returned a nil limiter and no error")
		}
		if err != nil {
			p.mu.Unlock()
			closeAll(evicted)
			return nil, err
		}
		e = &partitionEntry[L]{lim: lim}
		p.m[partition] = e
	}
	e.uses++
	e.last = now
	p.mu.Unlock()
	closeAll(evicted)
	return e, nil
}

func (p *partitions[L]) put(e *partitionEntry[L]) {
	now := time.Now()
	p.mu.Lock()
	e.uses--
	e.last = now
	p.mu.Unlock()
}

// sweepLocked removes the limiters idle for longer than the timeout and
// returns them, to be closed without the lock.
func (p *partitions[L]) sweepLocked(now time.Time) []L {
	var out []L
	for k, e := range p.m {
		if e.uses > 0 || now.Sub(e.last) < p.idle {
			continue
		}
		if e.lim.busy() {
			continue
		}
		delete(p.m, k)
		out = append(out, e.lim)
	}
	return out
}

func closeAll[L partitionable](ls []L) {
	for _, l := range ls {
		_ = l.Close()
	}
}
