package ratelimit

import (
	"container/list"
	"context"
	"strconv"
	"sync"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/engine"
)

// Deny-list cache defaults and bounds.
const (
	// DefaultDenyCacheCapacity is the number of identities a deny list's
	// local cache holds when no [WithDenyCache] is given.
	DefaultDenyCacheCapacity = 1024
	// DefaultDenyCacheLifetime is how long a cached membership is used
	// when no [WithDenyCache] is given.
	DefaultDenyCacheLifetime = time.Second
	// MaxDenyCacheLifetime bounds [WithDenyCache]'s lifetime.
	MaxDenyCacheLifetime = time.Minute
)

// DenyList is a set of identities (clients, tenants, users: exact bytes)
// refused by every limiter bound to it with [WithDenyList], before they
// use any capacity. It lives in Redis as a sorted set at its own key (any
// Cluster slot: it is read separately from the limiters' keys), without
// expiry: each identity scored with the end of its denial in server
// milliseconds, or +inf for a denial without end ([DenyList.Deny]); a
// timed denial ([DenyList.DenyFor], a lockout) ends by itself, judged by
// the server's clock. (A plain set, the layout before timed denials or an
// operator's SADD, is read as denials without end; Deny and Remove work
// on it, DenyFor does not.)
//
// Reads go through a local cache: a membership (denied or not) is used
// for a fixed lifetime counted from the start of the read that fetched it
// (hits do not extend it); at most a capacity of identities are kept,
// expired entries dropped first, then the least recently used. Concurrent
// misses for one identity share one Redis read, each caller waiting for it
// only as long as its own context allows; a failed read is not cached and
// its error reaches every caller that shared it. [DenyList.Invalidate]
// empties the cache and detaches reads in flight; [DenyList.Deny] and
// [DenyList.Remove] clear the identity's entry here before and after
// writing. Other processes see a change when their entry expires (there is
// no invalidation channel), so the list is an admission filter with
// bounded staleness, not an instant revocation. A cached denial is never
// used past the end of a timed denial (as the read that fetched it saw
// it).
//
// Share one DenyList per key in a process: each has its own cache. It is
// safe for concurrent use by multiple goroutines.
type DenyList struct {
	kind     *listKind // deny or allow: hook names, errors
	e        *engine.Engine
	keys     engine.Keys
	capacity int
	lifetime time.Duration

	mu       sync.Mutex
	gen      uint64 // bumped by Invalidate: older reads fill nothing
	entries  map[string]*list.Element
	lru      list.List // of *denyEntry, most recent first
	inflight map[string]*denyRead
}

type denyEntry struct {
	identity string
	denied   bool
	expires  time.Time
}

// denyRead is one Redis read shared by the callers that missed the cache.
type denyRead struct {
	done    chan struct{}
	started time.Time
	gen     uint64
	left    int64 // the read's answer: 0, -1 or ms left (decodeDenial)
	err     error
}

// listKind tells a deny list from an allow list ([AllowList] is a
// DenyList's machinery under other names): the operations it is admitted
// as, and how errors name it.
type listKind struct {
	read, write string // hook operations
	arg, ctor   string // the argument named for a nil list, its constructor
}

var (
	denyKind  = &listKind{read: hooks.RateLimitDenyListRead, write: hooks.RateLimitDenyListWrite, arg: "denyList", ctor: "NewDenyList"}
	allowKind = &listKind{read: hooks.RateLimitAllowListRead, write: hooks.RateLimitAllowListWrite, arg: "allowList", ctor: "NewAllowList"}
)

// DenyListOption configures [NewDenyList] and [NewAllowList].
type DenyListOption func(*DenyList) error

// WithDenyCache sets the local cache of a deny list (or of an allow
// list): at most capacity identities (1 or
// more), each kept for lifetime from the start of its read (0 to
// [MaxDenyCacheLifetime]; 0 disables the cache and the sharing of reads:
// every check reads Redis). Errors: coordination.ErrInvalidArgument naming
// "capacity" or "lifetime".
func WithDenyCache(capacity int, lifetime time.Duration) DenyListOption {
	return func(d *DenyList) error {
		if capacity < 1 {
			return check.InvalidArgument("capacity", "must be at least 1, got %d", capacity)
		}
		if lifetime < 0 || lifetime > MaxDenyCacheLifetime {
			return check.InvalidArgument("lifetime", "must be between 0 and %v, got %v", MaxDenyCacheLifetime, lifetime)
		}
		d.capacity, d.lifetime = capacity, lifetime
		return nil
	}
}

// NewDenyList returns the deny list at key. It sends nothing to Redis.
// Errors: coordination.ErrInvalidArgument naming "coord", "key" or the
// invalid option's.
func NewDenyList(coord *coordination.Coordinator, key string, opts ...DenyListOption) (*DenyList, error) {
	d := &DenyList{}
	if err := d.init(denyKind, coord, key, opts); err != nil {
		return nil, err
	}
	return d, nil
}

// init makes d a list of kind k at key.
func (d *DenyList) init(k *listKind, coord *coordination.Coordinator, key string, opts []DenyListOption) error {
	e, err := engine.Of(coord)
	if err != nil {
		return err
	}
	if err := check.Key("key", key); err != nil {
		return err
	}
	*d = DenyList{kind: k, e: e, keys: e.Key(key), capacity: DefaultDenyCacheCapacity, lifetime: DefaultDenyCacheLifetime,
		entries: map[string]*list.Element{}, inflight: map[string]*denyRead{}}
	return check.Apply(d, opts)
}

// Deny puts identity on the list without end (one script call, ZADD;
// admitted as RATE LIMIT DENY LIST WRITE), replacing a timed denial.
// Limiters in this process see it at once; other processes within their
// cache lifetime.
//
// Errors: coordination.ErrInvalidArgument naming "identity" (empty);
// coordination.ErrBadState when the key is neither a sorted set nor a
// plain set (the layout before timed denials, or an operator's SADD: Deny
// and Remove add and remove its members); Redis and network errors (the
// write may have been applied: read again to know; a write is sent at
// most once, so a lost reply is such an error, never a re-send that could
// undo another client's later write).
func (d *DenyList) Deny(ctx context.Context, identity string) error {
	return d.write(ctx, denyKind.write, identity, "1")
}

// DenyFor puts identity on the list for duration d, a lockout that ends
// by itself at the server's now plus d (one script call; admitted as RATE
// LIMIT DENY LIST WRITE). A denial that already ends later, or never, is
// kept (DenyFor never shortens one: [DenyList.Remove] first to). Each
// DenyFor also deletes the list's entries whose denial has ended. d is
// rounded up to whole milliseconds. Limiters in this process see it at
// once; other processes within their cache lifetime, and none uses it
// past its end.
//
// Errors: coordination.ErrInvalidArgument naming "identity" (empty) or
// "duration" (below 1 ms or above about 35 years), with nothing admitted
// or sent; coordination.ErrBadState when the key is not a sorted set (a
// plain set, the layout before timed denials or an operator's SADD, takes
// Deny and Remove but not DenyFor: delete it and deny again); Redis and
// network errors (the write may have been applied: read again to know).
func (d *DenyList) DenyFor(ctx context.Context, identity string, duration time.Duration) error {
	if duration < time.Millisecond || duration > time.Duration(maxSpanUs)*time.Microsecond {
		if err := checkIdentity(denyKind.write, d, identity); err != nil {
			return err
		}
		return engine.OpError(denyKind.write, d.keys, check.InvalidArgument("duration",
			"must be between 1ms and %v, got %v", time.Duration(maxSpanUs)*time.Microsecond, duration))
	}
	ms := (duration + time.Millisecond - 1) / time.Millisecond
	return d.write(ctx, denyKind.write, identity, "t"+strconv.FormatInt(int64(ms), 10))
}

// Remove takes identity off the list, ending a timed denial too (one
// script call, ZREM; admitted as RATE LIMIT DENY LIST WRITE). Errors are
// those of [DenyList.Deny].
func (d *DenyList) Remove(ctx context.Context, identity string) error {
	return d.write(ctx, denyKind.write, identity, "0")
}

// write adds (flag "1") or removes ("0") identity, admitted as d's write
// operation (op for a nil d).
func (d *DenyList) write(ctx context.Context, op, identity, flag string) error {
	if err := checkIdentity(op, d, identity); err != nil {
		return err
	}
	ctx, adm, err := d.e.Admit(ctx, d.kind.write, primitive, d.keys)
	if err != nil {
		return err
	}
	d.forget(identity)
	_, err = denyWriteScript.Run(ctx, d.e, d.keys, identity, flag)
	d.forget(identity) // also after a failure: the write may have landed
	return adm.End(err)
}

// Denied reports whether identity is on the list, through the local cache
// (admitted as RATE LIMIT DENY LIST READ, also for a cache hit). Errors:
// coordination.ErrInvalidArgument naming "identity" (empty); the
// context's error when ctx ends while waiting for a read; Redis and network
// errors of the read (not cached); coordination.ErrBadState when the key
// is neither a sorted set nor a plain set (whose members are denied
// without end).
func (d *DenyList) Denied(ctx context.Context, identity string) (bool, error) {
	return d.has(ctx, denyKind.read, identity)
}

// has is Denied (Allowed): membership through the cache, admitted as d's
// read operation (op for a nil d).
func (d *DenyList) has(ctx context.Context, op, identity string) (bool, error) {
	if err := checkIdentity(op, d, identity); err != nil {
		return false, err
	}
	ctx, adm, err := d.e.Admit(ctx, d.kind.read, primitive, d.keys)
	if err != nil {
		return false, err
	}
	in, err := d.member(ctx, identity)
	return in, adm.End(err)
}

// Invalidate empties the local cache and detaches the reads in flight:
// later checks read Redis again, and older reads fill nothing. It does no
// I/O.
func (d *DenyList) Invalidate() {
	d.mu.Lock()
	d.gen++
	clear(d.entries)
	d.lru.Init()
	clear(d.inflight)
	d.mu.Unlock()
}

// checkIdentity refuses a nil or zero list and a bad identity, with an
// error naming the operation op and the key.
func checkIdentity(op string, d *DenyList, identity string) error {
	if d == nil || d.e == nil {
		k := denyKind
		if op == allowKind.read || op == allowKind.write {
			k = allowKind
		}
		return engine.OpError(op, engine.Keys{}, check.InvalidArgument(k.arg, "must not be nil; use %s", k.ctor))
	}
	if identity == "" {
		return engine.OpError(op, d.keys, check.InvalidArgument("identity", "must not be empty"))
	}
	return engine.OpError(op, d.keys, check.Size("identity", len(identity), check.MaxIdentityBytes))
}

// forget drops identity's entry and detaches its read in flight.
func (d *DenyList) forget(identity string) {
	d.mu.Lock()
	if el, ok := d.entries[identity]; ok {
		d.lru.Remove(el)
		delete(d.entries, identity)
	}
	delete(d.inflight, identity)
	d.mu.Unlock()
}

// member answers whether identity is in the list: from the cache, by
// joining a read in flight, or by reading Redis. It is not admitted (a
// limiter's own check).
func (d *DenyList) member(ctx context.Context, identity string) (bool, error) {
	if d.lifetime == 0 {
		left, err := denyReadScript.Run(ctx, d.e, d.keys, identity)
		return left != 0, err
	}
	now := time.Now()
	d.mu.Lock()
	if el, ok := d.entries[identity]; ok {
		en := el.Value.(*denyEntry)
		if now.Before(en.expires) {
			d.lru.MoveToFront(el)
			d.mu.Unlock()
			return en.denied, nil
		}
		d.lru.Remove(el)
		delete(d.entries, identity)
	}
	r, ok := d.inflight[identity]
	if !ok || now.Sub(r.started) >= d.lifetime {
		if len(d.inflight) >= d.capacity && !ok {
			// Too many distinct reads in flight: this one is the
			// caller's own, neither shared nor cached.
			d.mu.Unlock()
			left, err := denyReadScript.Run(ctx, d.e, d.keys, identity)
			return left != 0, err
		}
		r = &denyRead{done: make(chan struct{}), started: now, gen: d.gen}
		d.inflight[identity] = r
		go d.read(context.WithoutCancel(ctx), identity, r)
	}
	d.mu.Unlock()
	select {
	case <-r.done:
		return r.left != 0, r.err
	case <-ctx.Done():
		return false, context.Cause(ctx)
	}
}

// read runs one shared read (not cancelled by any one caller) and caches
// its answer unless it failed or the cache was invalidated meanwhile.
func (d *DenyList) read(ctx context.Context, identity string, r *denyRead) {
	r.left, r.err = denyReadScript.Run(ctx, d.e, d.keys, identity)
	d.mu.Lock()
	if d.inflight[identity] == r {
		delete(d.inflight, identity)
	}
	if r.err == nil && r.gen == d.gen {
		// A timed denial is cached no longer than it lasts, counted from
		// the read's start (so never past its end).
		life := d.lifetime
		if r.left > 0 {
			life = min(life, time.Duration(r.left)*time.Millisecond)
		}
		d.storeLocked(identity, r.left != 0, r.started.Add(life))
	}
	d.mu.Unlock()
	close(r.done)
}

func (d *DenyList) storeLocked(identity string, denied bool, expires time.Time) {
	if !time.Now().Before(expires) {
		return
	}
	if el, ok := d.entries[identity]; ok {
		d.lru.Remove(el)
		delete(d.entries, identity)
	}
	if len(d.entries) >= d.capacity {
		now := time.Now()
		for el := d.lru.Back(); el != nil; {
			prev := el.Prev()
			if en := el.Value.(*denyEntry); !now.Before(en.expires) {
				d.lru.Remove(el)
				delete(d.entries, en.identity)
			}
			el = prev
		}
		for len(d.entries) >= d.capacity {
			el := d.lru.Back()
			d.lru.Remove(el)
			delete(d.entries, el.Value.(*denyEntry).identity)
		}
	}
	d.entries[identity] = d.lru.PushFront(&denyEntry{identity: identity, denied: denied, expires: expires})
}

// AllowList is a set of identities (clients, tenants, users: exact bytes)
// that no limiter bound to it with [WithAllowList] ever limits: their
// requests are granted without a decision and without consuming anything.
// It is a [DenyList]'s machinery under other names: a Redis sorted set
// at its own key (any Cluster slot; members scored +inf, as a deny list's
// denials without end; a plain set is read too), without expiry, read
// through the same local
// cache (see DenyList for its lifetime, capacity, shared reads and
// bounded staleness; [WithDenyCache] sets it), admitted as RATE LIMIT
// ALLOW LIST READ and WRITE.
//
// Share one AllowList per key in a process: each has its own cache. It is
// safe for concurrent use by multiple goroutines.
type AllowList struct {
	set DenyList
}

// NewAllowList returns the allow list at key. It sends nothing to Redis.
// Errors: coordination.ErrInvalidArgument naming "coord", "key" or the
// invalid option's.
func NewAllowList(coord *coordination.Coordinator, key string, opts ...DenyListOption) (*AllowList, error) {
	a := &AllowList{}
	if err := a.set.init(allowKind, coord, key, opts); err != nil {
		return nil, err
	}
	return a, nil
}

// list returns a's set, or nil for a nil a.
func (a *AllowList) list() *DenyList {
	if a == nil {
		return nil
	}
	return &a.set
}

// Allow puts identity on the list (one script call, ZADD; admitted as
// RATE LIMIT ALLOW LIST WRITE). Limiters in this process see it at once;
// other processes within their cache lifetime. Errors are those of
// [DenyList.Deny].
func (a *AllowList) Allow(ctx context.Context, identity string) error {
	return a.list().write(ctx, allowKind.write, identity, "1")
}

// Remove takes identity off the list (one script call, ZREM; admitted as
// RATE LIMIT ALLOW LIST WRITE). Errors are those of [DenyList.Deny].
func (a *AllowList) Remove(ctx context.Context, identity string) error {
	return a.list().write(ctx, allowKind.write, identity, "0")
}

// Allowed reports whether identity is on the list, through the local
// cache (admitted as RATE LIMIT ALLOW LIST READ, also for a cache hit).
// Errors are those of [DenyList.Denied].
func (a *AllowList) Allowed(ctx context.Context, identity string) (bool, error) {
	return a.list().has(ctx, allowKind.read, identity)
}

// Invalidate empties the local cache and detaches the reads in flight,
// as [DenyList.Invalidate]. It does no I/O; it does nothing on a nil
// list.
func (a *AllowList) Invalidate() {
	if a != nil {
		a.set.Invalidate()
	}
}
