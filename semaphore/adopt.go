package semaphore

import (
	"context"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/decode"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/layout"
)

// The scripts of adopting, reading and force-releasing a permit: the
// holders' read, and the holder's own release (waking waiters as the
// holder's release does), sent at most once.
var (
	holdersScript      = engine.NewScript("semaphore_holders", decodeHolders)
	forceReleaseScript = engine.NewScript("semaphore_release", decode.SoleRelease).Once()
)

// decodeHolders reads semaphore_holders' reply: every member
// P:<n>:<token> (1 <= n <= MaxCapacity) with a TTL >= 1 ms or none.
func decodeHolders(v any) ([]decode.Permits, bool) {
	return decode.PermitHolders(v, "P:", MaxCapacity, layout.IsToken)
}

// Adopt returns the [Permit] that token holds on the semaphore, for a
// process that restarted (or any other) and kept its permit's owner token
// ([coordination.Lease.Token]): one script lists the key's live holders at
// one server instant (admitted as SEMAPHORE ADOPT; its cost grows with the
// number of live holders). When token holds a live permit, the returned
// Permit is exactly an acquired one, with its [Permit.N], whose local
// deadline is the remaining TTL measured from the instant before the
// script was sent (less the drift allowance). Adopt writes nothing and
// does not extend the TTL: call [coordination.Lease.Refresh] with the
// permit's usual TTL (then [coordination.Lease.KeepAlive], which renews to
// the last TTL set: the remaining TTL read, until a Refresh). Adopt a
// token in one process only. (Adopt is not [Semaphore.Resume], which ends
// a drain.)
//
// Errors name the operation and the key and wrap: coordination.ErrNotHeld
// when token holds no live permit (an answer: hooks learn Succeeded);
// coordination.ErrInvalidArgument naming token (not an owner token: 22
// characters of base64url), ctx (nil) or semaphore (nil Semaphore),
// nothing sent; an error matching coordination.ErrBadState when the key is
// not a sorted set, holds a live member outside the layout, or token's
// permit has no expiry (written by hand); the hook's error;
// coordination.ErrClosed after Shutdown; Redis and network errors. It is
// safe for concurrent use.
func (s *Semaphore) Adopt(ctx context.Context, token string) (*Permit, error) {
	if err := s.check(); err != nil {
		return nil, engine.OpError(hooks.SemaphoreAdopt, engine.Keys{}, err)
	}
	if err := check.Token(token, layout.IsToken); err != nil {
		return nil, engine.OpError(hooks.SemaphoreAdopt, s.keys, err)
	}
	p := &Permit{sem: s}
	k, keys := kind, s.keys
	if s.fifo != nil {
		k, keys = fifoKind, s.fifo.keys // its release wakes the queue's head
	}
	h, err := s.e.AdoptHeld(ctx, hooks.SemaphoreAdopt, k, keys, nil, func(ctx context.Context) (engine.ReadTTL, error) {
		hs, err := holdersScript.Run(ctx, s.e, s.keys)
		e, ok := decode.FindPermits(hs, token)
		if err != nil || !ok {
			return engine.ReadTTL{}, err
		}
		p.n, p.id[0] = e.N, e.Member
		return engine.ReadTTL{Held: true, TTL: e.TTL, ID: p.id[:]}, nil
	})
	if err != nil {
		return nil, err
	}
	engine.InitLease(&p.Lease, s.key, token, h)
	return p, nil
}

// Holders lists the semaphore's live holders, in one round trip (one
// script, admitted as SEMAPHORE READ, as [Semaphore.State] is), writing
// nothing: each holder's Token, Permits (its N) and Remaining (its
// permit's remaining TTL, whole milliseconds; the largest time.Duration
// for a permit without expiry, written by hand), earliest expiry first;
// none (an empty slice, no error) when no permit is held. The answer may
// be stale by the time it returns. Its cost grows with the number of live
// holders.
//
// Errors name the operation and the key and wrap:
// coordination.ErrInvalidArgument naming ctx (nil) or semaphore (nil
// Semaphore), nothing sent; an error matching coordination.ErrBadState
// when the key is not a sorted set or holds a live member outside the
// layout; the hook's error; coordination.ErrClosed after Shutdown; Redis
// and network errors. It is safe for concurrent use.
func (s *Semaphore) Holders(ctx context.Context) ([]coordination.Holder, error) {
	if err := s.check(); err != nil {
		return nil, engine.OpError(hooks.SemaphoreRead, engine.Keys{}, err)
	}
	ctx, op, err := s.e.Admit(ctx, hooks.SemaphoreRead, primitive, s.keys)
	if err != nil {
		return nil, err
	}
	hs, err := holdersScript.Run(ctx, s.e, s.keys)
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
// administrator who read the holders with [Semaphore.Holders] first:
// naming the token never removes another holder. It wakes blocked
// acquirers exactly as the holder's release does (they take the freed
// permits at once), and reports true when it removed a live permit, false
// when token held none (nothing changed). Admitted once as SEMAPHORE FORCE
// RELEASE, it costs two round trips: the holders' read that finds token's
// member (its N), then the holder's own release script for it, which is
// sent at most once: after a lost reply (coordination.IsAmbiguous) it is
// not sent again; read the holders again. The forced holder's process
// learns of it at its next Refresh, Verify or renewal.
//
// Errors are those of [Semaphore.Holders], with
// coordination.ErrInvalidArgument naming token for a malformed one
// (nothing sent), and coordination.ErrBadState when the key lacks a valid
// capacity record. It is safe for concurrent use.
func (s *Semaphore) ForceRelease(ctx context.Context, token string) (bool, error) {
	if err := s.check(); err != nil {
		return false, engine.OpError(hooks.SemaphoreForceRelease, engine.Keys{}, err)
	}
	if err := check.Token(token, layout.IsToken); err != nil {
		return false, engine.OpError(hooks.SemaphoreForceRelease, s.keys, err)
	}
	keys, script := s.keys, forceReleaseScript
	if s.fifo != nil {
		keys, script = s.fifo.keys, fifoForceRelease // wakes the queue's head
	}
	return s.e.ForceRelease(ctx, hooks.SemaphoreForceRelease, primitive, keys, script, func(ctx context.Context) ([]any, error) {
		hs, err := holdersScript.Run(ctx, s.e, s.keys)
		if h, ok := decode.FindPermits(hs, token); err == nil && ok {
			return []any{h.Member}, nil
		}
		return nil, err
	}, nil)
}
