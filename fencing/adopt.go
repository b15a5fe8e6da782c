package fencing

import (
	"context"
	"strings"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/decode"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/fencelock"
	"github.com/coordkit/coordination/internal/layout"
)

// The scripts of adopting, reading and force-releasing a fencing lock. A
// force release runs the holder's own release script (waking waiters as
// the holder's release does; the counter is never touched), sent at most
// once.
var (
	holderScript       = engine.NewScript("fencing_holder", decodeHolder)
	forceReleaseScript = engine.NewScript("fencing_release", decode.Release).Once()
)

// holding is the decoded reply of fencing_holder.
type holding struct {
	Held  bool
	Token string
	Fence int64
	TTL   time.Duration // engine.NoExpiry for none
}

// decodeHolder reads false (free) or {owner, fence, pttl_ms}: owner an
// owner token (possibly with the waiter mark '+'), fence a positive
// decimal, pttl_ms >= 0 or -1 (none); 0, the lease's last millisecond
// (PTTL rounds down), reads as free.
func decodeHolder(v any) (holding, bool) {
	if v == nil {
		return holding{}, true
	}
	a, ok := decode.Array(v, 3)
	if !ok {
		return holding{}, false
	}
	s, ok1 := a[0].(string)
	fence, ok2 := decode.PositiveDecimal(a[1])
	p, ok3 := a[2].(int64)
	s = strings.TrimSuffix(s, "+")
	if !ok1 || !ok2 || !ok3 || !layout.IsToken(s) || (p < 0 && p != -1) {
		return holding{}, false
	}
	if p == 0 {
		return holding{}, true // the lease's last millisecond: ending now, read as free
	}
	ttl := engine.NoExpiry
	if p != -1 {
		ttl = time.Duration(p) * time.Millisecond
	}
	return holding{Held: true, Token: s, Fence: fence, TTL: ttl}, true
}

// Adopt returns the [Lock] that token holds, for a process that restarted
// (or any other) and kept its lock's owner token
// ([coordination.Lease.Token]): one script reads the lease key's owner,
// fencing token and remaining TTL (PTTL) at one server instant (admitted
// as FENCED LOCK ADOPT); the counter key is not touched. When token holds
// the lease, the returned Lock is exactly an acquired one, with the
// fencing token it was acquired with ([Lock.FencingToken]), whose local
// deadline is the remaining TTL measured from the instant before the
// script was sent (less the drift allowance). Adopt writes nothing and
// does not extend the TTL: call [coordination.Lease.Refresh] with the
// lock's usual TTL (then [coordination.Lease.KeepAlive], which renews to
// the last TTL set: the remaining TTL read, until a Refresh). Adopt a
// token in one process only.
//
// Errors name the operation and the lease key and wrap:
// coordination.ErrNotHeld when the lease is free or held by another token
// (an answer: hooks learn Succeeded); coordination.ErrInvalidArgument
// naming token (not an owner token: 22 characters of base64url), ctx
// (nil) or mutex (nil Mutex), nothing sent; coordination.ErrBadState when
// the lease key is not a hash, lacks its owner or fence field, holds an
// owner that is no token, or (for the owner) has no TTL; the hook's error;
// an error wrapping coordination.ErrClosed after Shutdown; Redis and
// network errors. It is safe for concurrent use.
func (m *Mutex) Adopt(ctx context.Context, token string) (*Lock, error) {
	if err := m.check(); err != nil {
		return nil, engine.OpError(hooks.FencedLockAdopt, engine.Keys{}, err)
	}
	if err := check.Token(token, layout.IsToken); err != nil {
		return nil, engine.OpError(hooks.FencedLockAdopt, m.keys, err)
	}
	l := &Lock{}
	h, err := m.e.AdoptHeld(ctx, hooks.FencedLockAdopt, fencelock.Kind, m.keys, []any{token}, func(ctx context.Context) (engine.ReadTTL, error) {
		r, err := holderScript.Run(ctx, m.e, m.keys.First())
		l.fence = r.Fence
		return engine.ReadTTL{Held: r.Held && r.Token == token, TTL: r.TTL}, err
	})
	if err != nil {
		return nil, err
	}
	engine.InitLease(&l.Lease, m.leaseKey, token, h)
	return l, nil
}

// Holder reads who holds the lock, in one round trip (one script on the
// lease key, admitted as FENCED LOCK READ), writing nothing: the holder's
// Token, FencingToken and Remaining (the lease key's PTTL, whole
// milliseconds, at least 1: a lease in its last millisecond reads as
// free; the largest time.Duration for a lease without TTL, written by
// hand). The answer may be stale by the time it returns.
//
// Errors name the operation and the lease key and wrap:
// coordination.ErrNotHeld when the lease is free (an answer);
// coordination.ErrInvalidArgument naming ctx (nil) or mutex (nil Mutex),
// nothing sent; coordination.ErrBadState when the lease key is not a
// hash, lacks its owner or fence field, or holds an owner that is no
// token; the hook's error; coordination.ErrClosed after Shutdown; Redis
// and network errors. It is safe for concurrent use.
func (m *Mutex) Holder(ctx context.Context) (coordination.Holder, error) {
	if err := m.check(); err != nil {
		return coordination.Holder{}, engine.OpError(hooks.FencedLockRead, engine.Keys{}, err)
	}
	ctx, op, err := m.e.Admit(ctx, hooks.FencedLockRead, fencelock.Kind.Primitive, m.keys)
	if err != nil {
		return coordination.Holder{}, err
	}
	r, err := holderScript.Run(ctx, m.e, m.keys.First())
	if err == nil && !r.Held {
		err = engine.Free
	}
	if err != nil {
		return coordination.Holder{}, op.End(err)
	}
	return coordination.Holder{Token: r.Token, FencingToken: r.Fence, Remaining: r.TTL}, op.End(nil)
}

// ForceRelease deletes the lease if token holds it, whoever calls, for an
// administrator who read the holder with [Mutex.Holder] first: naming the
// token never removes a newer holder that took over meanwhile. One script
// (the holder's own owner-checked release, admitted as FENCED LOCK FORCE
// RELEASE) wakes blocked acquirers exactly as the holder's release does.
// The counter stays: the next holder gets a larger fencing token, so the
// resource keeps rejecting the forced holder's writes once the next
// holder wrote. It reports true when it deleted the lease, false when
// token did not hold it (nothing changed; the holder is then read, a
// second round trip on this path only, to refuse a lease hash outside the
// layout). It is sent at most once: after
// a lost reply (coordination.IsAmbiguous) it is not sent again; read the
// holder again. The forced holder's process learns of it at its next
// Refresh, Verify or renewal.
//
// Errors name the operation and the lease key and wrap:
// coordination.ErrInvalidArgument naming token, ctx or mutex, nothing
// sent; coordination.ErrBadState when the lease key is not a hash or is
// a hash outside the lease's layout (an owner that is not an owner token,
// no fencing token), left as it was; the hook's error; coordination.ErrClosed after Shutdown; Redis and network
// errors. It is safe for concurrent use.
func (m *Mutex) ForceRelease(ctx context.Context, token string) (bool, error) {
	if err := m.check(); err != nil {
		return false, engine.OpError(hooks.FencedLockForceRelease, engine.Keys{}, err)
	}
	if err := check.Token(token, layout.IsToken); err != nil {
		return false, engine.OpError(hooks.FencedLockForceRelease, m.keys, err)
	}
	keys := m.keys.First()
	return m.e.ForceRelease(ctx, hooks.FencedLockForceRelease, fencelock.Kind.Primitive, keys, forceReleaseScript,
		func(context.Context) ([]any, error) { return []any{token}, nil },
		func(ctx context.Context) error {
			// The release removed nothing: the holder read tells a lease
			// hash outside the layout (ErrBadState) from another owner's.
			_, err := holderScript.Run(ctx, m.e, keys)
			return err
		})
}
