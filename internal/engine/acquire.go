package engine

import (
	"context"
	"time"

	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/decode"
	"github.com/coordkit/coordination/internal/sentinel"
)

// The wait flags of [LeaseKind.WaitFlag].
var (
	noWait   = []any{"0"}
	willWait = []any{"1"}
)

// AcquireRequest describes one acquisition of a lease.
type AcquireRequest struct {
	Kind *LeaseKind
	// Keys are the acquire script's keys, prefixed and slot-checked; the
	// first is the lease key whose release channel waiters watch.
	Keys Keys
	// ID identifies the lease in every script: usually one owner token
	// from [NewToken], reused by every attempt so that a re-send finds its
	// own lease.
	ID []any
	// TTL is the lease's TTL (0 only for kinds with NoExpiry).
	TTL time.Duration
	// Extra are further acquire-script arguments after the TTL.
	Extra []any
	// Block waits (on release notifications) until acquired or ctx ends;
	// otherwise one attempt.
	Block bool
	// Recheck is the blocking wait's re-check period (0: the default).
	Recheck time.Duration
	// WaitKey is the prefixed key whose release channel a blocking
	// acquisition watches: empty means the first key. A lease that is one
	// of many in a key (a hash field) watches a channel of its own, named
	// with WaitPart ([Engine.WatchPart]), which its release script
	// publishes on.
	WaitKey, WaitPart string
}

// AbandonFor is how long the record of an abandoned acquisition
// ([LeaseKind.Abandon]) lasts for a lease of the given TTL: the TTL, at
// least [minAbandon] and at most [CleanupLimit] (CleanupLimit for a lease
// without expiry). A request of the acquisition delayed longer than that
// can still take the lease, for at most its TTL (and one landing between
// another holder's release and [Engine.Abandon]'s next try holds it until
// that try).
//
// The same bound limits how long [Engine.Abandon] waits for another owner
// to let go of a single-holder kind's lease.
func AbandonFor(ttl time.Duration) time.Duration {
	if ttl <= 0 {
		return CleanupLimit
	}
	return min(max(ttl, minAbandon), CleanupLimit)
}

// minAbandon is the shortest life of an abandoned acquisition's record
// ([AbandonFor]).
const minAbandon = 5 * time.Second

// Acquire acquires a lease as r describes, admitted once as the kind's
// AcquireOp however long it waits; see [Op.Acquire] for the semantics. A
// bad TTL is refused before admission, naming the operation and the key
// ([OpError]) as every error of the acquisition does.
func (e *Engine) Acquire(ctx context.Context, r *AcquireRequest) (*Handle, decode.Grant, error) {
	if _, err := check.TTLMillis(r.TTL, r.Kind.NoExpiry); err != nil {
		return nil, decode.Grant{}, OpError(r.Kind.AcquireOp, r.Keys, err)
	}
	ctx, op, err := e.Admit(ctx, r.Kind.AcquireOp, r.Kind.Primitive, r.Keys)
	if err != nil {
		return nil, decode.Grant{}, err
	}
	h, g, err := op.Acquire(ctx, r)
	return h, g, op.End(err)
}

// Acquire acquires a lease as r describes as part of o, an operation the
// caller admitted and ends (a primitive whose public operation acquires a
// lease as one of its steps); nothing is admitted again.
//
// A non-blocking attempt that finds the lease held returns an error
// matching sentinel.ErrNotAcquired; a blocking one whose ctx ends returns
// the wait loop's give-up error ([Engine.Wait]: [gaveUp](ctx) when Redis
// answered its last attempt). When ctx has ended before anything was sent
// either returns ctx's cause ([Ended]), sending nothing. When any attempt of the
// operation may have run on the server without the caller learning it
// ([Engine.Ambiguous], sticky across attempts: a later LOADING does not
// make an earlier lost reply harmless) and the operation fails, the lease
// is released in the background, owner-checked, with the same id: by the
// kind's Abandon script when it has one, which also leaves a record that
// makes a late request of this acquisition take nothing.
//
// An acquisition granted once [Engine.Shutdown] has begun (its command
// was in flight) returns the shutdown's error, wrapping
// sentinel.ErrClosed, and releases the grant before returning (at most a
// second; else the lease ends at its TTL).
//
// On failure the decode.Grant is the last attempt's answer: with a non-blocking
// refusal (sentinel.ErrNotAcquired) its RetryIn and Value, what the server reported
// (a primitive's count of what is free); zero when the last attempt failed.
func (o Op) Acquire(ctx context.Context, r *AcquireRequest) (*Handle, decode.Grant, error) {
	e := o.e
	k := r.Kind
	ttlMs, err := check.TTLMillis(r.TTL, k.NoExpiry)
	if err != nil {
		return nil, decode.Grant{}, err
	}
	k.init()
	keys, id, extra := r.Keys, r.ID, r.Extra
	ttl := [1]any{k.ttlArg(ttlMs)}
	var flag []any
	if k.WaitFlag {
		flag = noWait
		if r.Block {
			flag = willWait
		}
	}
	var (
		g         decode.Grant
		sent      time.Time
		ambiguous bool
		attempts  int
	)
	// attempt sends one acquisition: the kind's First command for the
	// first attempt when it has one, its Acquire script otherwise.
	attempt := func(ctx context.Context) (decode.Grant, error) {
		sent = time.Now()
		attempts++
		if k.First != nil && attempts == 1 {
			g, _, err := k.First.run(ctx, e, keys, id, ttl[:], extra)
			if err != nil || !g.Again {
				return g, err
			}
			// What First found is for the script to decide (a cleanup's
			// tombstone): one more round trip, rare.
		}
		return k.Acquire.run(ctx, e, keys, id, ttl[:], extra, flag)
	}
	if !r.Block {
		if ctx.Err() != nil {
			// Not sent (go-redis would not send it either): nothing is
			// ambiguous, and nothing is left to clean up.
			return nil, decode.Grant{}, Ended(ctx)
		}
		g, err = attempt(ctx)
		if err != nil {
			ambiguous = e.Ambiguous(err)
		} else if !g.Acquired {
			e.Add(k.Metrics.Contention, 1, k.baseAdd...)
			err = sentinel.ErrNotAcquired
		}
	} else {
		start := time.Now()
		counted := false
		wk := r.WaitKey
		if wk == "" {
			wk = keys.firstKey()
		}
		var only string
		if k.Queued {
			only, _ = id[0].(string)
		}
		err = e.Wait(ctx, WaitConfig{Key: wk, Part: r.WaitPart, Only: only, Recheck: r.Recheck, OnContended: func() {
			if !counted {
				counted = true
				e.Add(k.Metrics.Contention, 1, k.baseAdd...)
			}
		}}, func(ctx context.Context) (Attempt, error) {
			var aerr error
			g, aerr = attempt(ctx)
			if aerr != nil {
				ambiguous = ambiguous || e.Ambiguous(aerr)
				return Attempt{}, aerr
			}
			return Attempt{Done: g.Acquired, RetryIn: g.RetryIn}, nil
		})
		wait := k.waitAcquired
		if err != nil {
			wait = k.waitGaveUp
		}
		e.Histogram(k.Metrics.Wait).Record(context.Background(), time.Since(start).Seconds(), wait)
	}
	hk := keys.head(k.HandleKeys)
	if err != nil {
		if ambiguous || (k.Queued && r.Block && attempts > 0) {
			if ambiguous && k.Abandon != nil {
				// It leaves a tombstone.
				e.Abandon(k.Abandon, hk, r.TTL, id...)
			} else {
				// The kind's release: for a queued waiter that gave up, it
				// leaves the queue.
				e.Cleanup("acquire", r.TTL, func(ctx context.Context) error {
					_, err := k.Release.Run(ctx, e, hk, id...)
					return err
				})
			}
		}
		// g is the last attempt's answer: with sentinel.ErrNotAcquired, the refusal
		// (RetryIn, Value); zero when that attempt failed.
		return nil, g, err
	}
	if e.life.closed.Load() {
		// Shutdown began while the acquisition was in flight: no handle
		// is handed out after it (the caller could not release it), and
		// the grant is released now, on the caller's goroutine, at most
		// a second; otherwise it ends at its TTL.
		rctx, cancel := context.WithTimeout(withoutAcks(context.WithoutCancel(ctx)), time.Second)
		_, _ = k.Release.Run(rctx, e, hk, id...)
		cancel()
		return nil, decode.Grant{}, errShutdown
	}
	return newHandle(e, k, hk, id, sent, r.TTL), g, nil
}
