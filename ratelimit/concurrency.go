package ratelimit

import (
	"context"
	"errors"
	"net"
	"strconv"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/lease"
	"github.com/coordkit/coordination/lua"
)

// DefaultLeaseDuration is the lease duration of a [Concurrency] limiter
// whose LeaseDuration is zero.
const DefaultLeaseDuration = 30 * time.Second

// minLeaseDuration is the shortest lease: renewals run every third of it,
// and must have time for a round trip.
const minLeaseDuration = 30 * time.Millisecond

// NewConcurrency returns a concurrency limiter on key (see [Concurrency]).
// It sends nothing to Redis.
//
// An acquired lease renews itself in the background every LeaseDuration/3
// (renewals are not admitted through hooks). When a renewal finds the entry
// gone, or cannot reach Redis before the lease runs out, the lease is lost:
// [Lease.Context] is cancelled with a cause wrapping coordination.ErrLost.
// Renewal bounds how long a crashed holder keeps its permits; it does not
// fence work that continues after a pause (there is no fencing token).
//
// Acquisition is idempotent: a re-sent or repeated attempt of one call finds
// its own entry instead of adding a second. A reply lost to a timeout or
// cancellation is cleaned up by a background release.
//
// State: one sorted set with a member per live lease plus one settings
// member; it is deleted when the last lease is released and otherwise
// expires with its latest lease. Each decision reads every live lease, so
// its cost grows with the number of leases held (at most Limit).
//
// Errors: coordination.ErrInvalidArgument for a nil coordinator, an empty
// key, Limit < 1, LeaseDuration below 30 ms (other than zero), or an
// invalid option.
func NewConcurrency(coord *coordination.Coordinator, key string, cfg Concurrency, opts ...Option) (Limiter, error) {
	if err := checkLimit("limit", cfg.Limit); err != nil {
		return nil, err
	}
	d := cfg.LeaseDuration
	if d == 0 {
		d = DefaultLeaseDuration
	}
	if d < minLeaseDuration {
		return nil, coordination.InvalidArgument("lease duration", "must be at least %v, got %v", minLeaseDuration, d)
	}
	ms, err := millis("lease duration", d)
	if err != nil {
		return nil, err
	}
	l, err := newLimiter(coord, key, cfg.Limit, opts)
	if err != nil {
		return nil, err
	}
	l.conc = true
	keys := []string{key}
	limit := int64(cfg.Limit)
	ttl := time.Duration(ms) * time.Millisecond
	l.try = func(ctx context.Context, permits int, token string) (decision, error) {
		member := strconv.Itoa(permits) + ":" + token
		sent := time.Now()
		cmd, err := coord.Eval(ctx, lua.RateLimitConcAcquire, keys, limit, ms, permits, member)
		if err != nil {
			if permits > 0 && coordination.IsAmbiguous(err) && !notSent(err) {
				// The lease may exist on the server although we cannot know:
				// remove it (the release is a no-op when it does not).
				lease.Cleanup(coord, "rate_limit_acquire", func(ctx context.Context) error {
					_, err := releaseMember(ctx, coord, key, member)
					return err
				})
			}
			return decision{}, err
		}
		d, err := decode(lua.RateLimitConcAcquire, cmd)
		if err != nil {
			return decision{}, err
		}
		d.hint, d.retry = d.retry, -1
		if !d.acquired || permits == 0 {
			return d, nil
		}
		h := &held{l: l, member: member}
		h.h = lease.New(coord, lease.Names{Primitive: primitive, Renew: hooks.RateLimitRenew,
			Verify: hooks.RateLimitRenew, Release: hooks.RateLimitRelease},
			lease.Ops{
				Refresh: func(ctx context.Context, ttlMs int64) (bool, error) {
					cmd, err := coord.Eval(ctx, lua.RateLimitConcRenew, keys, ttlMs, member)
					if err != nil {
						return false, err
					}
					n, err := cmd.Int64()
					return n == 1, err
				},
				Verify: func(ctx context.Context) (bool, error) {
					return false, errors.New("ratelimit: concurrency leases have no verify")
				},
				Release: func(ctx context.Context) (coordination.ReleaseOutcome, error) {
					return releaseMember(ctx, coord, key, member)
				},
			}, lease.Metrics{}, sent, ttl)
		if l.remember(h) {
			h.h.KeepAlive()
		}
		d.held = h
		return d, nil
	}
	return l, nil
}

func releaseMember(ctx context.Context, coord *coordination.Coordinator, key, member string) (coordination.ReleaseOutcome, error) {
	cmd, err := coord.Eval(ctx, lua.RateLimitConcRelease, []string{key}, member, coord.Channel(key))
	if err != nil {
		return 0, err
	}
	n, err := cmd.Int64()
	if err != nil {
		return 0, err
	}
	if n == 1 {
		return coordination.Released, nil
	}
	return coordination.AlreadyReleased, nil
}

// notSent reports whether err proves the command never left the client: a
// failed dial (connection refused, no route).
func notSent(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "dial"
}
