package ratelimit

import (
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"sync"
	"time"

	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/engine"
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
	max  int
}

// DefaultMaxPartitions is how many partitions a [Partitioned] or a
// [PartitionedConcurrency] keeps a live limiter for when no
// [WithMaxPartitions] is given: 10,000. A partition's local limiter is
// about 0.9 KB of heap (measured with a GCRA and a fixed window), so the
// cap bounds a partitioned limiter to about 9 MB, whatever the number of
// clients, which a flood of new identities within one idle timeout cannot
// exceed; 10,000 is more
// clients than one process usually serves within a minute (the default
// idle timeout), so a partition in steady use is rarely evicted.
const DefaultMaxPartitions = 10_000

// partitionScan is how many least recently used partitions one creation
// looks at for one it may evict (skipping those in use).
const partitionScan = 32

// WithMaxPartitions caps the number of partitions with a live limiter at
// n (the default is [DefaultMaxPartitions]). Creating the limiter of a new
// partition when n are live first closes and forgets the least recently
// used partitions that are not in use, as idle eviction does
// ([WithIdleTimeout]): their Redis state is kept, and the next call for
// such a partition creates its limiter again, which continues from that
// state (the Redis state is the truth; the local limiter is a cache of its
// settings and its queue). A partition in use (a call in progress, queued
// waiters, held concurrency leases) is never evicted, so its calls, its
// leases' renewals and releases are unaffected: when every live partition
// is in use, the count exceeds n by the partitions in use until they
// become idle. [Partitioned.Len] reports the count.
//
// n must be at least 1 (else coordination.ErrInvalidArgument naming
// "maxPartitions"); there is no unbounded mode: math.MaxInt is one in
// effect, asked for explicitly.
func WithMaxPartitions(n int) PartitionOption {
	return func(p *partitionConfig) error {
		if n < 1 {
			return check.InvalidArgument("maxPartitions", "must be >= 1, got %d", n)
		}
		p.max = n
		return nil
	}
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
// created on first use by a factory and evicted after it has been idle,
// or, past [WithMaxPartitions] live partitions ([DefaultMaxPartitions] by
// default), least recently used first. Eviction is done by the calls
// themselves (no background goroutine): at most every half idle timeout, a
// call closes the limiters idle longer than the timeout, and a call that
// creates a partition's limiter at the cap closes the least recently used
// one not in use. [Partitioned.UpdateAll] changes the settings of every
// partition at once.
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
	max     int

	// updateMu serializes updateAll calls, so that the live limiters and
	// the ones created later end with the same (the latest) settings.
	updateMu sync.Mutex

	mu        sync.Mutex
	closed    bool
	m         map[string]*partitionEntry[L]
	lru       list.List // of *partitionEntry[L], the most recently used first
	lastSweep time.Time
	// adopt gives a new limiter the settings of the latest updateAll (nil:
	// the factory's).
	adopt func(L) error
}

type partitionEntry[L partitionable] struct {
	lim  L
	key  string
	elem *list.Element
	last time.Time
	uses int
}

func (p *partitions[L]) init(factory func(string) (L, error), opts []PartitionOption) error {
	if factory == nil {
		return check.InvalidArgument("factory", "must not be nil")
	}
	cfg := partitionConfig{idle: DefaultIdleTimeout, max: DefaultMaxPartitions}
	if err := check.Apply(&cfg, opts); err != nil {
		return err
	}
	p.factory, p.idle, p.max, p.m, p.lastSweep = factory, cfg.idle, cfg.max, map[string]*partitionEntry[L]{}, time.Now()
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

// UpdateAll changes the settings of every partition to s, as
// [Limiter.Update] changes one limiter's: each live partition's limiter is
// updated (admitted through hooks as RATE LIMIT UPDATE, once per live
// partition; nothing is sent to Redis), and every limiter the factory
// creates afterwards (a new partition, or one evicted and used again)
// takes s instead of the factory's settings, for the life of p (call
// UpdateAll again to change them; the factory's algorithm must stay s's).
// The next decision of each partition migrates its Redis state to s by
// the rules of Update. A partition with no live limiter in this process
// keeps its Redis state as it is until its next use here, whose decision
// migrates it then; other processes keep deciding with their own settings
// until they update theirs (a rolling deploy gets decisions, never an
// error, on both sides, unless [WithStrictSettings]).
//
// s applies to every partition alike: for partitions with settings of
// their own (tiers), update their limiters one by one, or build a new
// Partitioned whose factory gives the new settings.
//
// It is safe for concurrent use with every other method; concurrent
// UpdateAll calls are applied one after the other.
//
// Errors, with nothing changed: coordination.ErrInvalidArgument naming
// "limiter" (nil p), "ctx" (nil), "settings" (nil, or another algorithm or composite
// structure than a live partition's) or the invalid setting ("limit",
// "window" ...); coordination.ErrClosed after Close. Errors of one
// partition's Update (ctx ended, a hook's refusal) stop UpdateAll and are
// returned: the partitions updated until then and those created
// afterwards have s, the others their former settings until UpdateAll
// is called again. A factory's limiter of another algorithm than s's
// fails the call that created it with an error naming "settings".
func (p *Partitioned) UpdateAll(ctx context.Context, s Settings) error {
	if p == nil || p.p.factory == nil {
		return engine.OpError(hooks.RateLimitUpdate, engine.Keys{}, check.InvalidArgument("limiter", "must not be nil; use NewPartitioned"))
	}
	if err := check.Context(ctx); err != nil {
		return engine.OpError(hooks.RateLimitUpdate, engine.Keys{}, err)
	}
	next, err := specOf("settings", s)
	if err != nil {
		return engine.OpError(hooks.RateLimitUpdate, engine.Keys{}, err)
	}
	return p.p.updateAll(ctx,
		func(l *Limiter) error { return engine.OpError(hooks.RateLimitUpdate, l.keys, l.sameAlgorithm(next)) },
		func(l *Limiter) error { return l.adopt(next) },
		func(ctx context.Context, l *Limiter) error { return l.Update(ctx, s) })
}

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

// UpdateAll changes the limit of every partition to limit concurrent
// permits, as [ConcurrencyLimiter.Update] changes one limiter's (each
// keeps its lease duration): each live partition's limiter is updated
// (admitted through hooks as RATE LIMIT UPDATE, once per live partition;
// nothing is sent to Redis; no lease held is revoked), and every limiter
// the factory creates afterwards takes limit instead of the factory's,
// for the life of p. A partition with no live limiter in this process
// keeps its recorded limit in Redis until its next acquisition here.
// [Partitioned.UpdateAll] says more; its concurrency safety and its
// errors are this method's, the invalid setting being "limit" (below 1
// or above 2^31-1).
func (p *PartitionedConcurrency) UpdateAll(ctx context.Context, limit int) error {
	if p == nil || p.p.factory == nil {
		return engine.OpError(hooks.RateLimitUpdate, engine.Keys{}, check.InvalidArgument("limiter", "must not be nil; use NewPartitionedConcurrency"))
	}
	if err := check.Context(ctx); err != nil {
		return engine.OpError(hooks.RateLimitUpdate, engine.Keys{}, err)
	}
	if _, err := (concurrency{limit: limit, lease: DefaultLeaseDuration}).spec(); err != nil {
		return engine.OpError(hooks.RateLimitUpdate, engine.Keys{}, err)
	}
	return p.p.updateAll(ctx,
		func(*ConcurrencyLimiter) error { return nil },
		func(c *ConcurrencyLimiter) error {
			next, err := concurrency{limit: limit, lease: c.l.spec().settings.(concurrency).lease}.spec()
			if err != nil {
				return err
			}
			return c.l.adopt(next)
		},
		func(ctx context.Context, c *ConcurrencyLimiter) error { return c.Update(ctx, limit) })
}

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
	p.lru.Init()
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
		evicted = append(evicted, p.makeRoomLocked()...)
		lim, err := p.factory(partition)
		var zero L
		if err == nil && lim == zero {
			err = check.InvalidArgument("factory", "returned a nil limiter and no error")
		}
		if err == nil && p.adopt != nil {
			if err = p.adopt(lim); err != nil {
				evicted = append(evicted, lim)
			}
		}
		if err != nil {
			p.mu.Unlock()
			closeAll(evicted)
			return nil, err
		}
		e = &partitionEntry[L]{lim: lim, key: partition}
		e.elem = p.lru.PushFront(e)
		p.m[partition] = e
	} else {
		p.lru.MoveToFront(e.elem)
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
		p.lru.Remove(e.elem)
		out = append(out, e.lim)
	}
	return out
}

// makeRoomLocked removes least recently used limiters not in use until
// there is room for one more under the cap, looking at partitionScan of
// them at most (those in use move to the front: they are being used), and
// returns them, to be closed without the lock.
func (p *partitions[L]) makeRoomLocked() []L {
	var out []L
	for i := 0; i < partitionScan && len(p.m) >= p.max; i++ {
		el := p.lru.Back()
		if el == nil {
			break
		}
		e := el.Value.(*partitionEntry[L])
		if e.uses > 0 || e.lim.busy() {
			p.lru.MoveToFront(el)
			continue
		}
		delete(p.m, e.key)
		p.lru.Remove(el)
		out = append(out, e.lim)
	}
	return out
}

// updateAll checks every live limiter with check (any error: nothing
// changes), makes adopt apply to the limiters created from now on, then
// updates each live limiter with update, stopping at the first error (a
// limiter closed meanwhile, evicted, is skipped: it will be created again
// with adopt).
func (p *partitions[L]) updateAll(ctx context.Context, check func(L) error, adopt func(L) error, update func(context.Context, L) error) error {
	p.updateMu.Lock()
	defer p.updateMu.Unlock()
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return engine.OpError(hooks.RateLimitUpdate, engine.Keys{}, sentinel.ErrClosed)
	}
	live := make([]L, 0, len(p.m))
	for _, e := range p.m {
		if err := check(e.lim); err != nil {
			p.mu.Unlock()
			return err
		}
		live = append(live, e.lim)
	}
	p.adopt = adopt
	p.mu.Unlock()
	for _, l := range live {
		if err := update(ctx, l); err != nil && !errors.Is(err, sentinel.ErrClosed) {
			return err
		}
	}
	return nil
}

func closeAll[L partitionable](ls []L) {
	for _, l := range ls {
		_ = l.Close()
	}
}
