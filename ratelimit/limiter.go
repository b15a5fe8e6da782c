package ratelimit

import (
	"container/list"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/hooks"
)

const primitive = "rate_limit"

// Limiter is a distributed rate limiter on one Redis key. Every process
// whose limiter uses the same key, algorithm and settings shares one budget;
// each decision is one Lua script run atomically on the server with the
// server's clock.
//
// Implementations in this package are safe for concurrent use by multiple
// goroutines.
type Limiter interface {
	// Acquire asks for permits once, without queueing, in one round trip
	// (admitted through hooks as RATE LIMIT ACQUIRE). The lease says
	// whether they were granted and, when not, may carry RetryAfter.
	//
	// permits = 0 probes whether a permit is free without taking it (a
	// concurrency probe likewise holds nothing). permits above the
	// limiter's capacity are refused at once, without a Redis call and
	// without RetryAfter.
	//
	// Errors: coordination.ErrInvalidArgument for negative permits (nothing
	// is admitted or sent); coordination.ErrClosed after Close; the
	// context's error when ctx ends (in every failure mode); errors
	// matching coordination.ErrConfigMismatch, coordination.ErrBadState or
	// coordination.ErrWrongType when the key holds other settings or
	// unexpected data; Redis and network errors when the failure mode is
	// ReturnError. A lost reply (timeout, cancellation, broken connection)
	// may still have consumed the permits on the server.
	Acquire(ctx context.Context, permits int) (Lease, error)

	// Wait is Acquire with the limiter's local queue (see [WithQueue]):
	// when refused, the request waits in the queue, sleeping until the
	// server-computed retry time, and tries again until it is granted, it
	// is evicted (NewestFirst), ctx ends, or the limiter is closed. It is
	// admitted through hooks once (RATE LIMIT ACQUIRE), however many
	// attempts it makes. Without a queue, or when the queue is full, it
	// returns the refused lease at once. A request that finds waiters
	// ahead of it queues behind them without trying Redis first; refused
	// because the queue is full, it then carries no RetryAfter.
	//
	// Errors are those of Acquire; when ctx ends while queued the error
	// matches both coordination.ErrNotAcquired and ctx's error, and after
	// Close queued requests fail with coordination.ErrClosed.
	Wait(ctx context.Context, permits int) (Lease, error)

	// Statistics returns this instance's counters. It does no I/O.
	Statistics() Statistics

	// Close fails queued requests with coordination.ErrClosed and makes
	// later calls fail the same way. Concurrency leases still held stop
	// being renewed: they keep their permits until they expire on the
	// server or are released. Close does not delete the limiter's Redis
	// state; another limiter on the same key continues with it. It is
	// idempotent and always returns nil.
	Close() error
}

// Statistics are one limiter instance's counters, not cluster-wide figures.
type Statistics struct {
	// Granted counts acquired leases returned by this instance (including
	// leases granted by FailOpen).
	Granted int64
	// Rejected counts unacquired leases returned by this instance.
	Rejected int64
	// QueuedPermits is the number of permits waiting in the local queue now.
	QueuedPermits int64
	// AvailablePermits is the number of free permits in the latest reply
	// from Redis, or -1 before the first. Other processes may have used
	// them since.
	AvailablePermits int64
}

// decision is one script reply, decoded.
type decision struct {
	acquired  bool
	available int64
	retry     time.Duration // < 0: none
	hint      time.Duration // concurrency: earliest lease expiry, < 0: none
	held      *held
}

// tryFunc runs the algorithm's script once. token is the caller's request
// token (concurrency only; empty otherwise).
type tryFunc func(ctx context.Context, permits int, token string) (decision, error)

type limiter struct {
	coord    *coordination.Coordinator
	key      string
	capacity int
	opts     options
	try      tryFunc
	conc     bool

	allowed     metric.Int64Counter
	blocked     metric.Int64Counter
	unavailable metric.Int64Counter

	granted, rejected atomic.Int64
	available         atomic.Int64
	active            atomic.Int64 // calls in progress (for partition eviction)

	mu     sync.Mutex
	closed bool
	queue  list.List // of *waiter
	queued int64     // permits in queue
	heldM  map[*held]struct{}
	wake   chan struct{} // concurrency: a local release happened
}

var (
	capacityAttrs    = metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", "capacity")))
	unavailableAttrs = metric.WithAttributeSet(attribute.NewSet(attribute.String("reason", "unavailable")))
	failOpenAttrs    = metric.WithAttributeSet(attribute.NewSet(attribute.String("failure_mode", "fail_open")))
	failClosedAttrs  = metric.WithAttributeSet(attribute.NewSet(attribute.String("failure_mode", "fail_closed")))
	failErrorAttrs   = metric.WithAttributeSet(attribute.NewSet(attribute.String("failure_mode", "return_error")))
)

func newLimiter(coord *coordination.Coordinator, key string, capacity int, opts []Option) (*limiter, error) {
	if err := coord.Check(); err != nil {
		return nil, err
	}
	if err := coordination.CheckKey("key", key); err != nil {
		return nil, err
	}
	l := &limiter{coord: coord, key: key, capacity: capacity, wake: make(chan struct{}, 1)}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&l.opts); err != nil {
			return nil, err
		}
	}
	l.available.Store(-1)
	l.allowed = coord.Int64Counter("coordination.rate_limit.allowed",
		"Rate-limit acquisitions that returned an acquired lease (once per Acquire or Wait).", "{lease}")
	l.blocked = coord.Int64Counter("coordination.rate_limit.blocked",
		"Rate-limit acquisitions that returned an unacquired lease, by reason (capacity, unavailable).", "{lease}")
	l.unavailable = coord.Int64Counter("coordination.rate_limit.unavailable",
		"Rate-limit decisions Redis could not give, by the failure mode applied.", "{decision}")
	return l, nil
}

func checkPermits(permits int) error {
	if permits < 0 {
		return coordination.InvalidArgument("permits", "must be >= 0, got %d", permits)
	}
	return nil
}

// Acquire implements [Limiter].
func (l *limiter) Acquire(ctx context.Context, permits int) (Lease, error) {
	ctx, finish, token, err := l.begin(ctx, permits)
	if err != nil {
		return Lease{}, err
	}
	defer l.active.Add(-1)
	d, err := l.attempt(ctx, permits, token)
	return l.settle(ctx, d, err, finish)
}

// begin starts an Acquire or Wait: it validates permits (nothing admitted
// for bad input), admits the call through hooks as RATE LIMIT ACQUIRE,
// counts it as active (the caller must decrement l.active when it returns
// with a nil error), refuses a closed limiter and draws the request token.
func (l *limiter) begin(ctx context.Context, permits int) (context.Context, coordination.Finish, string, error) {
	if err := checkPermits(permits); err != nil {
		return ctx, nil, "", err
	}
	ctx, finish, err := l.coord.Admit(ctx, hooks.RateLimitAcquire, primitive)
	if err != nil {
		return ctx, nil, "", err
	}
	l.mu.Lock()
	closed := l.closed
	l.mu.Unlock()
	if closed {
		return ctx, nil, "", finish(coordination.ErrClosed)
	}
	token, err := l.token()
	if err != nil {
		return ctx, nil, "", finish(err)
	}
	l.active.Add(1)
	return ctx, finish, token, nil
}

// token returns a fresh request token for concurrency limiters (reused by
// every attempt of one call, so a re-sent or repeated attempt whose earlier
// reply was lost finds its own lease), or "" for the others.
func (l *limiter) token() (string, error) {
	if !l.conc {
		return "", nil
	}
	// 16 random bytes (128 bits) in 22 characters: shorter than a UUID, so
	// every live lease costs fewer bytes in the sorted set.
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("ratelimit: request token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// attempt makes one decision: locally for oversized requests, else one
// script run.
func (l *limiter) attempt(ctx context.Context, permits int, token string) (decision, error) {
	if permits > l.capacity {
		return decision{available: -1, retry: -1, hint: -1}, nil
	}
	d, err := l.try(ctx, permits, token)
	if err == nil {
		l.available.Store(d.available)
	}
	return d, err
}

// settle turns a decision or error into the caller's result, applying the
// failure mode, and records statistics, metrics and the hook outcome.
func (l *limiter) settle(ctx context.Context, d decision, err error, finish coordination.Finish) (Lease, error) {
	if err != nil {
		if cerr := ctxEnded(ctx); cerr != nil && !errors.Is(err, cerr) {
			// go-redis reports a context deadline that cut a read short as an
			// i/o timeout; it is the caller's cancellation all the same.
			err = fmt.Errorf("%w: %w", cerr, err)
		}
		if coordination.Classify(err) == coordination.Canceled || !redisUnavailable(err) {
			return Lease{}, finish(err)
		}
		finish(err) // hooks see the failure whatever the mode
		switch l.opts.failure {
		case FailOpen:
			l.unavailable.Add(context.Background(), 1, failOpenAttrs)
			l.granted.Add(1)
			return Lease{acquired: true, failedOpen: true, available: -1}, nil
		case FailClosed:
			l.unavailable.Add(context.Background(), 1, failClosedAttrs)
			l.blocked.Add(context.Background(), 1, unavailableAttrs)
			l.rejected.Add(1)
			return Lease{available: -1}, nil
		default:
			l.unavailable.Add(context.Background(), 1, failErrorAttrs)
			return Lease{}, err
		}
	}
	finish(nil)
	return l.grant(d), nil
}

// grant turns a decision into a lease and counts it.
func (l *limiter) grant(d decision) Lease {
	if d.acquired {
		l.granted.Add(1)
		l.allowed.Add(context.Background(), 1)
		return Lease{acquired: true, available: d.available, held: d.held}
	}
	l.rejected.Add(1)
	l.blocked.Add(context.Background(), 1, capacityAttrs)
	le := Lease{available: d.available}
	if d.retry >= 0 {
		le.hasRetry, le.retry = true, max(d.retry, time.Millisecond)
	}
	return le
}

// Statistics implements [Limiter].
func (l *limiter) Statistics() Statistics {
	l.mu.Lock()
	q := l.queued
	l.mu.Unlock()
	return Statistics{Granted: l.granted.Load(), Rejected: l.rejected.Load(), QueuedPermits: q, AvailablePermits: l.available.Load()}
}

// Close implements [Limiter].
func (l *limiter) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	for e := l.queue.Front(); e != nil; e = e.Next() {
		w := e.Value.(*waiter)
		w.state = wClosed
		w.signal()
	}
	l.queue.Init()
	l.queued = 0
	hs := make([]*held, 0, len(l.heldM))
	for h := range l.heldM {
		hs = append(hs, h)
	}
	l.mu.Unlock()
	for _, h := range hs {
		h.h.StopKeepAlive()
	}
	return nil
}

// busy reports whether the limiter has calls in progress, queued waiters or
// held concurrency leases (a partitioned limiter never evicts it then).
func (l *limiter) busy() bool {
	if l.active.Load() > 0 {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for h := range l.heldM {
		if !h.h.Held() {
			delete(l.heldM, h) // lost or expired locally
		}
	}
	return l.queue.Len() > 0 || len(l.heldM) > 0
}

func (l *limiter) remember(h *held) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.heldM == nil {
		l.heldM = map[*held]struct{}{}
	}
	l.heldM[h] = struct{}{}
	return !l.closed
}

func (l *limiter) forget(h *held) {
	l.mu.Lock()
	delete(l.heldM, h)
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// ctxEnded returns ctx's error, or context.DeadlineExceeded when its
// deadline has passed but its timer has not fired yet (a read cut short by
// the deadline can return first).
func ctxEnded(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}

// redisUnavailable reports whether err means Redis could not give a
// decision (a network error, a stopped server, an error reply such as
// LOADING, READONLY or NOPERM), as opposed to a usage error: a closed
// limiter, an invalid argument, or a key holding other settings or foreign
// data, which every failure mode returns as an error.
func redisUnavailable(err error) bool {
	return !errors.Is(err, coordination.ErrClosed) && !errors.Is(err, coordination.ErrInvalidArgument) &&
		!errors.Is(err, coordination.ErrConfigMismatch) && !errors.Is(err, coordination.ErrBadState)
}
