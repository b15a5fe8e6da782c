package ratelimit

import (
	"context"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/decode"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/layout"
)

// The scripts of adopting, reading and force-releasing a concurrency
// lease: the holders' read, and the holder's own release (waking waiters
// as the holder's release does), sent at most once.
var (
	concHoldersScript      = engine.NewScript("ratelimit_conc_holders", decodeConcHolders)
	concForceReleaseScript = engine.NewScript("ratelimit_conc_release", decode.SoleRelease).Once()
)

// decodeConcHolders reads ratelimit_conc_holders' reply: every member
// <n>:<token> (1 <= n <= maxLimit) with a TTL >= 1 ms or none.
func decodeConcHolders(v any) ([]decode.Permits, bool) {
	return decode.PermitHolders(v, "", maxLimit, layout.IsToken)
}

// checkServer refuses what cannot hold a lease in Redis: a nil or zero
// limiter, and a local one ([NewLocalConcurrency]); errors name op.
func (c *ConcurrencyLimiter) checkServer(op string) error {
	if err := c.check(op, nil); err != nil {
		return err
	}
	if c.l.alt != nil && c.l.alt.sw == nil {
		return engine.OpError(op, c.l.keys, check.InvalidArgument("limiter", "a local concurrency limiter holds no leases in Redis"))
	}
	return nil
}

// Adopt returns the [ConcurrencyLease] that token holds on the limiter's
// key, for a process that restarted (or any other) and kept its lease's
// token ([ConcurrencyLease.Token]): one script lists the key's live leases
// at one server instant (admitted as RATE LIMIT ADOPT; its cost grows with
// the number of live leases). When token holds a live lease, the returned
// lease is exactly an acquired one, with its [ConcurrencyLease.N], whose
// local deadline is the remaining TTL measured from the instant before the
// script was sent (less the drift allowance). Adopt writes nothing, does
// not extend the TTL and, unlike an acquisition, starts no keep-alive:
// call [coordination.Lease.Refresh] with the limiter's lease duration
// (then [coordination.Lease.KeepAlive], which renews to the last TTL set:
// the remaining TTL read, until a Refresh). The lease is this limiter's
// from then on: [ConcurrencyLimiter.Close] stops its renewals as it does
// an acquired lease's. Adopt a token in one process only.
//
// Errors name the operation and the key and wrap: coordination.ErrNotHeld
// when token holds no live lease (an answer: hooks learn Succeeded);
// coordination.ErrInvalidArgument naming token (not a lease token: 22
// characters of base64url), ctx (nil) or limiter (nil, or a local
// limiter), nothing sent; an error matching coordination.ErrBadState when
// the key is not a sorted set, holds a live member outside the layout, or
// token's lease has no expiry (written by hand); the hook's error;
// coordination.ErrClosed after Close or Shutdown; Redis and network
// errors. It is safe for concurrent use.
func (c *ConcurrencyLimiter) Adopt(ctx context.Context, token string) (*ConcurrencyLease, error) {
	if err := c.checkServer(hooks.RateLimitAdopt); err != nil {
		return nil, err
	}
	l := c.l
	if err := check.Token(token, layout.IsToken); err != nil {
		return nil, engine.OpError(hooks.RateLimitAdopt, l.keys, err)
	}
	var n int64
	h, err := l.e.AdoptHeld(ctx, hooks.RateLimitAdopt, concKind, l.keys, nil, func(ctx context.Context) (engine.ReadTTL, error) {
		if l.isClosed() {
			return engine.ReadTTL{}, errLimiterClosed
		}
		hs, err := concHoldersScript.Run(ctx, l.e, l.keys)
		e, ok := decode.FindPermits(hs, token)
		if err != nil || !ok {
			return engine.ReadTTL{}, err
		}
		n = e.N
		return engine.ReadTTL{Held: true, TTL: e.TTL, ID: []any{e.Member}}, nil
	})
	if err != nil {
		return nil, err
	}
	hd := &held{l: l, h: h, token: token}
	if !l.remember(hd) {
		h.Lose(errClosedLease) // closed meanwhile: not renewed
	}
	cl := &ConcurrencyLease{n: int(n), held: hd}
	engine.InitLease(&cl.Lease, l.key, token, h)
	return cl, nil
}

// Holders lists the limiter's live leases, in one round trip (one script,
// admitted as RATE LIMIT PEEK), writing nothing: each holder's Token,
// Permits (its [ConcurrencyLease.N]) and Remaining (its lease's remaining
// TTL, whole milliseconds; the largest time.Duration for a lease without
// expiry, written by hand), earliest expiry first; none (an empty slice,
// no error) when no lease is held. The tombstones of abandoned
// acquisitions hold nothing and are not listed. The answer may be stale by
// the time it returns. Its cost grows with the number of live leases.
//
// Errors name the operation and the key and wrap:
// coordination.ErrInvalidArgument naming ctx (nil) or limiter (nil, or a
// local limiter), nothing sent; an error matching coordination.ErrBadState
// when the key is not a sorted set or holds a live member outside the
// layout; the hook's error; coordination.ErrClosed after Close or
// Shutdown; Redis and network errors. It is safe for concurrent use.
func (c *ConcurrencyLimiter) Holders(ctx context.Context) ([]coordination.Holder, error) {
	if err := c.checkServer(hooks.RateLimitPeek); err != nil {
		return nil, err
	}
	l := c.l
	ctx, op, err := l.admitOpen(ctx, hooks.RateLimitPeek)
	if err != nil {
		return nil, err
	}
	hs, err := concHoldersScript.Run(ctx, l.e, l.keys)
	if err != nil {
		return nil, op.End(err)
	}
	out := make([]coordination.Holder, len(hs))
	for i, h := range hs {
		out[i] = coordination.Holder{Token: h.Token, Remaining: h.TTL, Permits: h.N}
	}
	return out, op.End(nil)
}

// ForceRelease gives back token's permits whoever calls, for an
// administrator who read the holders with [ConcurrencyLimiter.Holders]
// first: naming the token never removes another lease. It wakes waiters
// exactly as the holder's [ConcurrencyLease.Release] does (through Redis
// Pub/Sub in every process, and this limiter's local queue), and reports
// true when it removed a live lease, false when token held none (nothing
// changed). Admitted once as RATE LIMIT FORCE RELEASE, it costs two round
// trips: the holders' read that finds token's member (its permits), then
// the holder's own release script for it, which is sent at most once:
// after a lost reply (coordination.IsAmbiguous) it is not sent again; read
// the holders again. The forced holder's process learns of it at its next
// Refresh, Verify or renewal (its lease is then lost).
//
// Errors are those of [ConcurrencyLimiter.Holders], with
// coordination.ErrInvalidArgument naming token for a malformed one
// (nothing sent). It is safe for concurrent use.
func (c *ConcurrencyLimiter) ForceRelease(ctx context.Context, token string) (bool, error) {
	if err := c.checkServer(hooks.RateLimitForceRelease); err != nil {
		return false, err
	}
	l := c.l
	if err := check.Token(token, layout.IsToken); err != nil {
		return false, engine.OpError(hooks.RateLimitForceRelease, l.keys, err)
	}
	ok, err := l.e.ForceRelease(ctx, hooks.RateLimitForceRelease, primitive, l.keys, concForceReleaseScript, func(ctx context.Context) ([]any, error) {
		if l.isClosed() {
			return nil, errLimiterClosed
		}
		hs, err := concHoldersScript.Run(ctx, l.e, l.keys)
		if h, ok := decode.FindPermits(hs, token); err == nil && ok {
			return []any{h.Member}, nil
		}
		return nil, err
	}, nil)
	if ok {
		l.wakeHead() // permits were returned: this process's queue too
	}
	return ok, err
}

// Adopt calls [ConcurrencyLimiter.Adopt] on partition's limiter, creating
// it first when needed; the adopted lease keeps the partition from being
// evicted while it is held, as an acquired one does. Errors are those of
// Adopt, the factory's error, or coordination.ErrClosed after Close.
func (p *PartitionedConcurrency) Adopt(ctx context.Context, partition, token string) (*ConcurrencyLease, error) {
	e, err := p.p.get(partition)
	if err != nil {
		return nil, err
	}
	defer p.p.put(e)
	return e.lim.Adopt(ctx, token)
}

// Holders calls [ConcurrencyLimiter.Holders] on partition's limiter,
// creating it first when needed (a limiter does no I/O when created).
// Errors are those of Holders, the factory's error, or
// coordination.ErrClosed after Close.
func (p *PartitionedConcurrency) Holders(ctx context.Context, partition string) ([]coordination.Holder, error) {
	e, err := p.p.get(partition)
	if err != nil {
		return nil, err
	}
	defer p.p.put(e)
	return e.lim.Holders(ctx)
}

// ForceRelease calls [ConcurrencyLimiter.ForceRelease] on partition's
// limiter, creating it first when needed. Errors are those of
// ForceRelease, the factory's error, or coordination.ErrClosed after
// Close.
func (p *PartitionedConcurrency) ForceRelease(ctx context.Context, partition, token string) (bool, error) {
	e, err := p.p.get(partition)
	if err != nil {
		return false, err
	}
	defer p.p.put(e)
	return e.lim.ForceRelease(ctx, token)
}
