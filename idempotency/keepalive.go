package idempotency

import (
	"context"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/engine"
)

// keepAliveOp names [Store.KeepAlive] in its errors: it is not admitted
// through hooks (its renewals are not), so it has no hooks operation name.
const keepAliveOp = "IDEMPOTENCY KEEP ALIVE"

// KeepAlive keeps the pending claim c (a Started answer of [Store.Begin] on
// key with ttl) alive while its work runs: it renews the claim's TTL to ttl
// every ttl/3 in the background (owner-checked, one round trip each, not
// admitted through hooks) until stop is called or the claim is lost. It
// returns a context derived from ctx for the work: it is cancelled when
// the claim is lost (a renewal found it gone or taken over, a renewal
// failed terminally, or the local deadline passed while renewals failed),
// with a cause matching coordination.ErrLost, and when stop is called.
// Call stop once the work is over, after [Store.Complete], [Store.Abandon]
// or [Store.Fail]; it sends nothing and may be called more than once.
//
// [Store.Do] and the middleware keep their claims alive this way unless
// told otherwise ([WithKeepAlive](false), [WithClaimKeepAlive]). Keep-alive
// does not replace fencing: a process paused longer than ttl (a stop-the-
// world pause, a frozen VM) loses its claim before a renewal can run; pass
// c.Fence to the work's writes so that a resource that checks tokens
// refuses the late writes of a taken-over original.
//
// Errors (nothing started): coordination.ErrInvalidArgument naming "key"
// (empty or too long), "ttl" (under 1 ms), "owner" (a claim without one) or
// "claim" (not a Started claim), and, but for a bad key, the operation and
// the key (`coordination: idempotency keep alive "KEY": invalid argument
// ttl: ...`).
func (s *Store) KeepAlive(ctx context.Context, key string, c Claim, ttl time.Duration) (work context.Context, stop func(), err error) {
	e, k, err := s.checkOwned(keepAliveOp, key, c.Owner)
	if err != nil {
		return nil, nil, err
	}
	if err := check.Context(ctx); err != nil {
		return nil, nil, engine.OpError(keepAliveOp, k, err)
	}
	if _, err := check.Millis("ttl", ttl); err != nil {
		return nil, nil, engine.OpError(keepAliveOp, k, err)
	}
	if c.State != Started || c.sent.IsZero() {
		return nil, nil, engine.OpError(keepAliveOp, k, check.InvalidArgument("claim", "must be a Started claim returned by Begin"))
	}
	h := e.Adopt(claimKind, k, []any{c.Owner}, c.sent, ttl)
	h.KeepAlive()
	work, cancel := context.WithCancelCause(ctx)
	unhook := context.AfterFunc(h.Context(), func() {
		cancel(context.Cause(h.Context()))
	})
	return work, func() {
		unhook()
		h.Forget()
		cancel(coordination.ErrReleased)
	}, nil
}
