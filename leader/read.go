package leader

import (
	"context"
	"errors"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/fencelock"
)

// Info is who leads an election, as read from Redis at one instant. The
// zero Info (FencingToken 0) means nobody leads.
type Info struct {
	// Identity is the leader's identity as given to [New], or as its term
	// last proclaimed it ([Term.Proclaim]); empty when the lease was taken
	// by a plain fencing lock without a holder.
	Identity string
	// FencingToken is the leader's term's fencing token (positive), or 0
	// when nobody leads.
	FencingToken int64
	// TTL is the lease's remaining time as the server reported it when it
	// was read: the leader renews it every half lease duration, and a
	// crashed leader is replaced soon after it runs out.
	TTL time.Duration
	// Start is when the term began, by the server's clock (to the
	// millisecond): the instant the elector announced its won term, one
	// round trip after the win. Zero when unknown: the announcement
	// failed, or the lease was taken by a plain fencing lock or an earlier
	// version of the library.
	Start time.Time
}

// Get reads who leads the election whose lease is at leaseKey (unprefixed),
// in one round trip (admitted as LEADER READ). It needs no [Elector]: any
// process with a coordinator can ask. The answer may be stale by the time
// it arrives; do not use it to decide that the caller itself leads.
//
// Errors: [ErrNoLeader] when the lease is free; coordination.ErrInvalidArgument
// for a nil coordinator or an empty key (nothing sent);
// coordination.ErrBadState when the key holds
// something else, or a lease without a TTL (PERSISTed or RESTOREd
// without one: its leader would never leave; nothing is written); the
// hook's error; Redis and network errors.
func Get(ctx context.Context, coord *coordination.Coordinator, leaseKey string) (Info, error) {
	e, k, err := readArgs(coord, leaseKey)
	if err != nil {
		return Info{}, err
	}
	return get(ctx, e, k)
}

// readArgs checks the coordinator and the lease key of [Get] and
// [Observe]; its errors name the operation, LEADER READ, as every error of
// a read does (nothing admitted).
func readArgs(coord *coordination.Coordinator, leaseKey string) (*engine.Engine, engine.Keys, error) {
	e, err := engine.Of(coord)
	if err != nil {
		return nil, engine.Keys{}, engine.OpError(hooks.LeaderRead, engine.Keys{}, err)
	}
	if err := check.Key("leaseKey", leaseKey); err != nil {
		return nil, engine.Keys{}, engine.OpError(hooks.LeaderRead, engine.Keys{}, err)
	}
	return e, e.Key(leaseKey), nil
}

// get reads the holder of the lease at the prefixed key k through the
// fencing lock's layout reader, admitted once as LEADER READ.
func get(ctx context.Context, e *engine.Engine, k engine.Keys) (Info, error) {
	ctx, op, err := e.Admit(ctx, hooks.LeaderRead, primitive, k)
	if err != nil {
		return Info{}, err
	}
	r, err := fencelock.Read(ctx, e, k)
	if err == nil && !r.Held {
		err = ErrNoLeader
	}
	if err != nil {
		return Info{}, op.End(err)
	}
	return Info{Identity: r.Holder, FencingToken: r.Fence, TTL: r.TTL, Start: r.Since}, op.End(nil)
}

// Observe follows the leadership of the election whose lease is at
// leaseKey: it calls fn with the current leader (the zero [Info] when
// there is none), then again each time the leader's identity or fencing
// token changes, until ctx ends. It blocks; fn runs on the caller's
// goroutine, one call at a time, and should return quickly.
//
// It wakes (Pub/Sub notification) when an elector of this library wins a
// term (each won term is announced) or its leader proclaims a new
// identity ([Term.Proclaim]), when a leader releases a lease that a
// campaigning elector found held (a release notifies only when a
// contended attempt marked the lease; an Observe read does not mark),
// when the lease's TTL runs out, and otherwise every poll interval, the
// fallback when a notification is lost (a reconnect, an ACL without the
// channel, an announcement that failed). So every term is reported once
// it lasts longer than a read; a term that ends before the observer's
// read is answered can still be missed (observers see the latest state). Each
// read is admitted as LEADER READ. Transient errors are retried after the
// poll interval.
//
// It returns nil when ctx ends; an error wrapping
// coordination.ErrInvalidArgument (nothing sent) for a nil coordinator, an
// empty key or a poll interval below 1 ms; or a terminal error of a read
// (a permission error, coordination.ErrBadState ...).
func Observe(ctx context.Context, coord *coordination.Coordinator, leaseKey string, poll time.Duration, fn func(Info)) error {
	e, k, err := readArgs(coord, leaseKey)
	if err != nil {
		return err
	}
	if err := check.Context(ctx); err != nil {
		return engine.OpError(hooks.LeaderRead, k, err)
	}
	if _, err := check.Millis("poll", poll); err != nil {
		return engine.OpError(hooks.LeaderRead, k, err)
	}
	if fn == nil {
		return engine.OpError(hooks.LeaderRead, k, check.InvalidArgument("fn", "must not be nil"))
	}
	return observe(ctx, e, k, poll, fn)
}

// observe is Observe on checked arguments.
func observe(ctx context.Context, e *engine.Engine, k engine.Keys, poll time.Duration, fn func(Info)) error {
	var (
		last  Info
		first = true
	)
	// The engine's wait loop never ends on its own here: every attempt
	// reports "not done" with the time until the lease's expiry.
	err := e.Wait(ctx, engine.WaitConfig{Key: k.Full()[0], Recheck: poll, MinBackoff: poll, MaxBackoff: poll},
		func(ctx context.Context) (engine.Attempt, error) {
			info, err := get(ctx, e, k)
			if err != nil && !errors.Is(err, ErrNoLeader) {
				if engine.Classify(err) == engine.Transient {
					e.Logger().Warn("leader: observing failed; retrying", "error", engine.Describe(err))
				}
				return engine.Attempt{}, err
			}
			if first || info.Identity != last.Identity || info.FencingToken != last.FencingToken {
				first = false
				last = info
				fn(info)
			}
			a := engine.Attempt{}
			if info.FencingToken > 0 && info.TTL > 0 {
				a.RetryIn = info.TTL + time.Millisecond
			}
			return a, nil
		})
	if engine.Classify(err) == engine.Canceled && ctx.Err() != nil {
		return nil
	}
	return err
}
