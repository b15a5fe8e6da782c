package ratelimit

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/decode"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/instrument"
	"github.com/coordkit/coordination/internal/sentinel"
)

// DefaultLeaseDuration is the lease duration of a [ConcurrencyLimiter]
// built without [WithLeaseDuration].
const DefaultLeaseDuration = 30 * time.Second

// minLeaseDuration is the shortest lease: renewals run every third of it,
// and must have time for a round trip.
const minLeaseDuration = 30 * time.Millisecond

// concKind is the concurrency lease's kind: its hook names, scripts and
// instruments (coordination.rate_limit.concurrency.*). Leases are acquired
// unadmitted: [ConcurrencyLimiter.TryAcquire] and
// [ConcurrencyLimiter.Acquire] are admitted once as RATE LIMIT ACQUIRE
// themselves. Keep-alive renewals are not admitted; explicit refreshes are
// RATE LIMIT RENEW, verifies RATE LIMIT VERIFY, releases RATE LIMIT
// RELEASE.
var concKind = &engine.LeaseKind{
	Primitive: primitive,
	AcquireOp: hooks.RateLimitAcquire, RenewOp: hooks.RateLimitRenew, VerifyOp: hooks.RateLimitVerify, ReleaseOp: hooks.RateLimitRelease,
	Acquire: concAcquireScript, Refresh: concRenewScript, Verify: concVerifyScript, Release: concReleaseScript,
	Abandon: concAbandonScript,
	Metrics: concurrencyMetrics,
}

// ConcurrencyLimiter is a distributed concurrency limiter on one Redis
// key, built by [NewConcurrency]: at most its limit of permits are held at
// once by live leases across every process using the key.
//
// Each acquired lease ([*ConcurrencyLease]) is an entry in a sorted set
// that expires its lease duration ([WithLeaseDuration]) after its last
// renewal; the lease renews itself in the background every third of it
// while held (renewals are not admitted through hooks) and returns its
// permits on [ConcurrencyLease.Release]. A holder that crashes frees its
// permits when its entry expires. When a renewal finds the entry gone, or
// cannot reach Redis before the lease runs out, the lease is lost: its
// Context is cancelled with a cause matching coordination.ErrLost.
// Renewal bounds how long a crashed holder keeps its permits; it does not
// fence work that continues after a pause (there is no fencing token).
// Release every lease: one that a live process drops without Release
// keeps renewing, and holds its permits, for as long as the process lives
// (the renewal keeps it from being collected).
// Refusals carry no RetryAfter: nobody knows when a holder finishes.
//
// Acquisition is idempotent: each attempt has its own random member, and a
// re-send of one attempt finds its own entry instead of adding a second. An
// attempt whose outcome is unknown (a lost reply, a timeout, a
// cancellation) is released in the background, owner-checked, however later
// attempts fare; the cleanup leaves a tombstone of the attempt's member
// (0 permits, expiring by itself after the lease duration clamped to
// 5 s..1 min) so that the attempt's request, if it reaches the server
// after the cleanup, takes nothing. Other callers ignore tombstones.
//
// State: one sorted set with a member per live lease plus one settings
// member; it is deleted when the last lease is released and otherwise
// expires with its latest lease. Each decision reads every live lease, so
// its cost grows with the number of leases held (at most the limit). A key
// recording another limit takes this limiter's (or, with
// [WithStrictSettings], is refused with coordination.ErrConfigMismatch).
//
// The options of [New] apply ([WithQueue], [WithFailureMode],
// [WithStrictSettings], [WithDenyList]), and [WithLeaseDuration].
// A ConcurrencyLimiter is safe for concurrent use by multiple goroutines.
// The zero value is not usable.
type ConcurrencyLimiter struct {
	l *Limiter
}

// concurrency is the settings of a concurrency limiter: not exported, a
// ConcurrencyLimiter is built by NewConcurrency.
type concurrency struct {
	limit int
	lease time.Duration // 0: DefaultLeaseDuration
}

// NewConcurrency returns a concurrency limiter on key allowing limit
// permits held at once (see [ConcurrencyLimiter]). It sends nothing to
// Redis.
//
// Errors: coordination.ErrInvalidArgument naming the argument: "coord"
// (nil), "key" (empty, or longer than 1 KiB), "limit" (below 1 or above
// 2^31-1), "leaseDuration" ([WithLeaseDuration] below 30 ms or above about
// 35 years), or the invalid option's.
func NewConcurrency(coord *coordination.Coordinator, key string, limit int, opts ...Option) (*ConcurrencyLimiter, error) {
	l, err := newLimiter(coord, key, concurrency{limit: limit}, opts)
	if err != nil {
		return nil, err
	}
	return &ConcurrencyLimiter{l: l}, nil
}

// check refuses a nil or zero limiter, and permits below 1 unless
// permits is nil (Update): errors naming the operation op and the key.
func (c *ConcurrencyLimiter) check(op string, permits *int) error {
	if c == nil || c.l == nil || c.l.e == nil {
		return engine.OpError(op, engine.Keys{}, check.InvalidArgument("limiter", "must not be nil; use NewConcurrency"))
	}
	if permits != nil && *permits < 1 {
		return engine.OpError(op, c.l.keys, check.InvalidArgument("permits", "must be >= 1, got %d", *permits))
	}
	return nil
}

// TryAcquire takes permits as one lease if they are free, in one round
// trip, without waiting (admitted through hooks as RATE LIMIT ACQUIRE; a
// refusal is an answer, not a failure). It does not take a place in the
// local queue: callers waiting in [ConcurrencyLimiter.Acquire] are not
// ahead of it. The lease renews itself until released.
//
// When the permits are not free it returns a [*WaitError] matching
// coordination.ErrNotAcquired (semaphore's TryAcquireN returns
// ErrNotAcquired itself: errors.Is treats both alike, and the *WaitError
// adds Denied and Err); so is the refusal of a denied identity ([WithDenyList]: Denied is true) and of
// [FailClosed] (Err is the failure). Under [FailOpen] a Redis failure
// grants a lease that holds nothing ([ConcurrencyLease.FailedOpen]).
//
// Errors: coordination.ErrInvalidArgument naming "permits" for permits
// below 1 or above the limit (nothing admitted or sent); a [*WaitError] for
// a refusal; coordination.ErrClosed after Close; the context's error when
// ctx ends; errors matching coordination.ErrConfigMismatch (another
// algorithm on the key, or another limit with [WithStrictSettings]),
// coordination.ErrBadState when the key holds
// unexpected data; the hook's error when a hook rejects; Redis and network
// errors (also of the deny list's read) when the failure mode is
// ReturnError. An attempt whose reply never came back is released in the
// background.
func (c *ConcurrencyLimiter) TryAcquire(ctx context.Context, permits int) (*ConcurrencyLease, error) {
	if err := c.check(hooks.RateLimitAcquire, &permits); err != nil {
		return nil, err
	}
	r, err := c.l.allow(ctx, permits, 0)
	if err != nil {
		return nil, err
	}
	if !r.acquired {
		why := whyNone
		if r.cause != nil {
			why = whyUnavailable
		}
		we := newWaitError(c.l.keys, permits, r, why, nil)
		we.try = true
		return nil, we
	}
	return c.lease(r, permits), nil
}

// Acquire takes permits as one lease, waiting in the limiter's local queue
// while they are not free, as long as ctx allows (admitted through hooks
// once, as RATE LIMIT ACQUIRE, however many attempts it makes). It returns
// an acquired lease, or a nil lease and an error: never a nil error
// without the permits. The lease renews itself until released.
//
// A queued request does not poll: the head of the queue sleeps until a
// lease is released here or announced on Redis Pub/Sub (re-checking at
// least every 5 s, and every 250 ms while the subscription is not
// confirmed) or the earliest lease would expire; the others sleep until
// they become the head. [WithQueue] bounds the queue as for
// [Limiter.Wait].
//
// Errors: those of TryAcquire; a [*WaitError] (matching
// coordination.ErrNotAcquired) for every refusal: queue full, evicted,
// denied, refused by [FailClosed], and when ctx ends while queued (it then
// also matches ctx's error, context.Cause). After Close queued requests
// fail with coordination.ErrClosed. A Redis failure while queued ends the
// wait: the limiter's [FailureMode] applies ([FailOpen] grants).
func (c *ConcurrencyLimiter) Acquire(ctx context.Context, permits int) (*ConcurrencyLease, error) {
	if err := c.check(hooks.RateLimitAcquire, &permits); err != nil {
		return nil, err
	}
	r, err := c.l.waitErr(ctx, permits)
	if err != nil {
		return nil, err
	}
	return c.lease(r, permits), nil
}

// lease builds the lease of an acquired result.
func (c *ConcurrencyLimiter) lease(r result, permits int) *ConcurrencyLease {
	cl := &ConcurrencyLease{n: permits, failedOpen: r.failedOpen, held: r.held}
	if r.held != nil {
		engine.InitLease(&cl.Lease, c.l.key, r.held.token, r.held.h)
	}
	return cl
}

// Update changes the limit (admitted through hooks as RATE LIMIT UPDATE),
// keeping the lease duration. It sends nothing to Redis: the next
// acquisition records the new limit, which applies to the leases held
// (none is revoked: when more are held than the new limit, new requests
// wait until enough are released). Processes still running the old limit
// keep deciding with it; [WithStrictSettings] makes that an error. It
// wakes the local queue, and fails queued requests for more permits than
// the new limit ([ConcurrencyLimiter.Acquire] returns an error wrapping
// coordination.ErrInvalidArgument naming "permits").
//
// Errors: coordination.ErrInvalidArgument naming "limiter" (nil) or
// "limit" (below 1 or above 2^31-1), with nothing admitted;
// coordination.ErrClosed after Close; the hook's error.
func (c *ConcurrencyLimiter) Update(ctx context.Context, limit int) error {
	if err := c.check(hooks.RateLimitUpdate, nil); err != nil {
		return err
	}
	cur := c.l.spec().settings.(concurrency)
	return c.l.Update(ctx, concurrency{limit: limit, lease: cur.lease})
}

// Statistics returns this instance's counters. It does no I/O.
func (c *ConcurrencyLimiter) Statistics() Statistics {
	if c == nil || c.l == nil {
		return Statistics{AvailablePermits: -1}
	}
	return c.l.Statistics()
}

// Close fails queued requests with coordination.ErrClosed and makes later
// calls fail the same way. Leases still held stop being renewed: their
// contexts are cancelled (the cause matches coordination.ErrLost) and
// their permits return when their entries expire on the server or they are
// released. Close does not delete the limiter's Redis state; another
// limiter on the same key continues with it. It is idempotent and always
// returns nil.
func (c *ConcurrencyLimiter) Close() error {
	if c == nil || c.l == nil {
		return nil
	}
	return c.l.Close()
}

// ConcurrencyLease is one held lease of a [ConcurrencyLimiter]: N permits
// taken together, released together. Its lease methods are those of the
// embedded [coordination.Lease], admitted through hooks as RATE LIMIT
// RENEW, VERIFY and RELEASE: it renews itself in the background (its
// keep-alive runs from the acquisition; KeepAlive does nothing more; a
// lease returned by [ConcurrencyLimiter.Adopt] renews once KeepAlive is
// called),
// Release never returns NotOwned (a lease belongs to its holder alone),
// Key is the limiter's key, and Token is 22 random base64url characters
// (128 bits). Its member in the sorted set is "<N>:<Token>". It adds
// [ConcurrencyLease.N] and [ConcurrencyLease.FailedOpen].
//
// A lease granted by [FailOpen] (Redis could not be reached) holds
// nothing: FailedOpen reports true, its Context is never cancelled (the
// request was admitted; run the work), Release returns
// coordination.AlreadyReleased without asking Redis, and Refresh and
// Verify report false.
//
// It is safe for concurrent use by multiple goroutines.
type ConcurrencyLease struct {
	coordination.Lease
	n          int
	failedOpen bool
	held       *held
}

// N returns the number of permits the lease holds (for a lease granted by
// FailOpen: the permits asked for).
func (l *ConcurrencyLease) N() int {
	if l == nil {
		return 0
	}
	return l.n
}

// FailedOpen reports whether the lease was granted without asking Redis
// because Redis could not be reached and the limiter's failure mode is
// [FailOpen]. Such a lease holds nothing.
func (l *ConcurrencyLease) FailedOpen() bool { return l != nil && l.failedOpen }

// Release returns the lease's permits (one script call, admitted as RATE
// LIMIT RELEASE) and wakes waiters of the key, here and (through Redis
// Pub/Sub) in other processes; see [coordination.Lease.Release]. It
// returns coordination.Released, or coordination.AlreadyReleased when the
// entry was already gone (it expired), the lease was released before (then
// without asking Redis), or it was granted by FailOpen.
func (l *ConcurrencyLease) Release(ctx context.Context) (coordination.ReleaseOutcome, error) {
	if l.held == nil {
		return l.Lease.Release(ctx)
	}
	out, err := l.held.release(ctx)
	return coordination.ReleaseOutcome(out), err
}

// Context returns [coordination.Lease.Context]; for a lease that holds
// nothing (granted by FailOpen or an allow list), a context that is never
// cancelled and has no deadline; for a local lease ([NewLocalConcurrency],
// [WithLocalFallback]), a context without deadline cancelled by Release
// (cause coordination.ErrReleased).
func (l *ConcurrencyLease) Context() context.Context {
	if l.held == nil {
		return context.Background()
	}
	if l.held != nil && l.held.h == nil {
		return l.held.l.alt.leaseContext(l.held)
	}
	return l.Lease.Context()
}

// Attributes of the concurrency wait histogram, built once.
var (
	waitAcquired = instrument.Attrs(attribute.String("result", "acquired"))
	waitGaveUp   = instrument.Attrs(attribute.String("result", "gave_up"))
)

func (c concurrency) spec() (*spec, error) {
	if err := limitCheck("limit", c.limit); err != nil {
		return nil, err
	}
	d := c.lease
	if d == 0 {
		d = DefaultLeaseDuration
	}
	if d < minLeaseDuration {
		return nil, check.InvalidArgument("leaseDuration", "must be at least %v, got %v", minLeaseDuration, d)
	}
	ms, err := check.Millis("leaseDuration", d)
	if err != nil {
		return nil, err
	}
	if ms > maxSpanUs/1000 {
		return nil, check.InvalidArgument("leaseDuration", "must be at most %v, got %v", time.Duration(maxSpanUs)*time.Microsecond, d)
	}
	return &spec{settings: c, alg: algConc, capacity: c.limit, leaseMs: ms, cfg: fmt.Sprintf("x:%d:%d", c.limit, ms)}, nil
}

// concTry asks a concurrency limiter once: a probe runs the acquire script
// directly (it holds nothing); a request for permits is an engine lease
// acquisition with a fresh member, as part of op (the caller's admitted
// RATE LIMIT ACQUIRE).
func (l *Limiter) concTry(ctx context.Context, op engine.Op, sp *spec, permits int) (verdict, error) {
	if l.alt != nil {
		return l.decideAlt(ctx, sp, permits, false, func() (verdict, error) { return l.concTryRedis(ctx, op, sp, permits) })
	}
	return l.concTryRedis(ctx, op, sp, permits)
}

// concTryRedis is concTry's script run.
func (l *Limiter) concTryRedis(ctx context.Context, op engine.Op, sp *spec, permits int) (verdict, error) {
	strict := "0"
	if l.opts.strict {
		strict = "1"
	}
	limit := int64(sp.capacity)
	if permits == 0 {
		g, err := concAcquireScript.Run(ctx, l.e, l.keys, "", sp.leaseMs, limit, 0, strict)
		if err != nil {
			return verdict{}, err
		}
		return concDecision(g), nil
	}
	token, err := newToken()
	if err != nil {
		return verdict{}, err
	}
	member := strconv.Itoa(permits) + ":" + token
	h, g, err := op.Acquire(ctx, &engine.AcquireRequest{
		Kind: concKind, Keys: l.keys, ID: []any{member}, TTL: time.Duration(sp.leaseMs) * time.Millisecond,
		Extra: []any{limit, permits, strict},
	})
	if errors.Is(err, sentinel.ErrNotAcquired) {
		return concDecision(g), nil
	}
	if err != nil {
		return verdict{}, err
	}
	d := concDecision(g)
	hd := &held{l: l, h: h, token: token}
	if l.remember(hd) {
		h.KeepAlive()
	} else {
		h.Lose(errClosedLease) // closed meanwhile: not renewed
	}
	d.held = hd
	return d, nil
}

func concDecision(g decode.Grant) verdict {
	return verdict{acquired: g.Acquired, available: concAvailable(g), hint: g.RetryIn}
}

// newToken returns a lease member's random part: 16 random bytes (128
// bits) in 22 characters, shorter than a UUID, so every live lease costs
// fewer bytes in the sorted set.
func newToken() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("ratelimit: lease token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// recordWait records the time a concurrency request spent in the queue.
func (l *Limiter) recordWait(start time.Time, acquired bool) {
	if l.spec().alg != algConc {
		return
	}
	a := waitGaveUp
	if acquired {
		a = waitAcquired
	}
	l.e.Histogram(concurrencyMetrics.Wait).Record(context.Background(), time.Since(start).Seconds(), a)
}
