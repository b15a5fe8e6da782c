package lock

import (
	"context"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/decode"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/layout"
	"github.com/coordkit/coordination/internal/lockcore"
)

// The scripts of adopting, reading and force-releasing a held lock or
// named lease. A force release runs the holder's own release script (so it
// wakes waiters exactly as the holder's release does), sent at most once:
// a re-send after a lost reply could not tell its own release from a
// release by the holder.
var (
	holderScript       = lockcore.Holder
	forceReleaseScript = engine.NewScript("lock_release", decode.Release).Once()
	fifoForceRelease   = engine.NewScript("lock_fifo_release", decode.Release).Once()
	fieldHolderScript  = engine.NewScript("lease_holder", lockcore.DecodeHolder(false)).Requires(engine.HashFieldExpiration)
	fieldForceRelease  = engine.NewScript("lease_release", decode.Release).Once().Requires(engine.HashFieldExpiration)
)

// holding is the decoded reply of lock_holder and lease_holder.
type holding = lockcore.Holding

// Adopt returns the [Lock] that token holds on the key, for a process that
// restarted (or any other) and kept its lock's owner token
// ([coordination.Lease.Token]): one script reads the key's owner and
// remaining TTL (PTTL) at one server instant (admitted as LOCK ADOPT);
// when token holds it, the returned Lock is exactly an acquired one
// (Release, Refresh, Verify, KeepAlive, Context and Remaining work, and
// are owner-checked with token), whose local deadline is the remaining
// TTL measured from the instant before the script was sent (less the drift
// allowance). Adopt writes nothing and does not extend the TTL: call
// [coordination.Lease.Refresh] with the lock's usual TTL (then
// [coordination.Lease.KeepAlive], which renews to the last TTL set, the
// remaining TTL read until a Refresh) before the lock runs out. Two
// processes adopting one token both hold handles to one lock: adopt a
// token in one process only.
//
// A lock made [WithFIFO] is adopted with its order: its release hands the
// lock to the queue's head, as an acquired one's does.
//
// Errors name the operation and the key (`coordination: lock adopt "KEY":
// ...`) and wrap: coordination.ErrNotHeld when the lock is free or held by
// another token (an answer: hooks learn Succeeded);
// coordination.ErrInvalidArgument naming token when token is not an owner
// token (22 characters of base64url), ctx when nil, or mutex for a nil
// Mutex, with nothing admitted or sent; coordination.ErrBadState when the
// key holds a string that is no owner token, or the owner's key has no TTL
// (PERSISTed by hand), or (wrong Redis type) a non-string value; the
// hook's error when a hook rejects; an error wrapping
// coordination.ErrClosed after the coordinator's Shutdown began; Redis and
// network errors. It is safe for concurrent use.
func (m *Mutex) Adopt(ctx context.Context, token string) (*Lock, error) {
	if err := m.check(); err != nil {
		return nil, engine.OpError(hooks.LockAdopt, engine.Keys{}, err)
	}
	if err := check.Token(token, layout.IsToken); err != nil {
		return nil, engine.OpError(hooks.LockAdopt, m.keys, err)
	}
	l := &Lock{id: [1]any{token}}
	k := kind
	if m.fifo != nil {
		k = fifoKind // its release hands the lock to the queue's head
	}
	h, err := m.e.AdoptHeld(ctx, hooks.LockAdopt, k, m.keys, l.id[:], func(ctx context.Context) (engine.ReadTTL, error) {
		r, err := holderScript.Run(ctx, m.e, m.keys.First())
		return engine.ReadTTL{Held: r.Held && r.Token == token, TTL: r.TTL}, err
	})
	if err != nil {
		return nil, err
	}
	engine.InitLease(&l.Lease, m.key, token, h)
	return l, nil
}

// Holder reads who holds the lock and its remaining TTL on the server, in
// one round trip (one script, admitted as LOCK READ), writing nothing. It
// returns the holder's Token and Remaining (the key's PTTL, whole
// milliseconds, at least 1: a lock in its last millisecond reads as free;
// the largest time.Duration for an owner token without TTL, PERSISTed by
// hand); the other fields of coordination.Holder are zero.
// The answer may be stale by the time it returns.
//
// Errors name the operation and the key and wrap:
// coordination.ErrNotHeld when the lock is free (an answer);
// coordination.ErrInvalidArgument naming ctx (nil) or mutex (nil Mutex),
// with nothing sent; coordination.ErrBadState when the key holds a value
// that is no owner token or is not a string; the hook's error; an error
// wrapping coordination.ErrClosed after Shutdown; Redis and network
// errors. It is safe for concurrent use.
func (m *Mutex) Holder(ctx context.Context) (coordination.Holder, error) {
	if err := m.check(); err != nil {
		return coordination.Holder{}, engine.OpError(hooks.LockRead, engine.Keys{}, err)
	}
	return readHolder(ctx, m.e, hooks.LockRead, m.keys.First(), holderScript)
}

// readHolder runs a holder script (args after the keys), admitted as op.
func readHolder(ctx context.Context, e *engine.Engine, op string, keys engine.Keys, s *engine.Script[holding], args ...any) (coordination.Holder, error) {
	ctx, o, err := e.Admit(ctx, op, "lock", keys)
	if err != nil {
		return coordination.Holder{}, err
	}
	r, err := s.Run(ctx, e, keys, args...)
	if err == nil && !r.Held {
		err = engine.Free
	}
	if err != nil {
		return coordination.Holder{}, o.End(err)
	}
	return coordination.Holder{Token: r.Token, Remaining: r.TTL}, o.End(nil)
}

// ForceRelease deletes the lock if token holds it, whoever calls, for an
// administrator who read the holder with [Mutex.Holder] first: naming the
// token never removes a newer holder that took over meanwhile. One script
// (the holder's own owner-checked release, admitted as LOCK FORCE
// RELEASE) wakes blocked acquirers exactly as the holder's release does:
// they take the lock at once. It reports true when it deleted the lock,
// false when token did not hold it (free, expired, or another owner's;
// nothing changed); the release then reads the holder (a second round
// trip, on this path only) to refuse a value that is not an owner token
// with coordination.ErrBadState, left as it was. It is sent at most once: after a lost reply (an error
// for which coordination.IsAmbiguous reports true) it is not sent again,
// and the lock may or may not have been deleted; read the holder again.
// The holder's process learns of it at its next Refresh, Verify or
// keep-alive renewal (its lease is then lost) or its deadline. On a lock
// made [WithFIFO] it is that order's release: the queue's head is woken,
// alone, and token is removed from the queue of waiters.
//
// Errors name the operation and the key and wrap:
// coordination.ErrInvalidArgument naming token (not an owner token), ctx
// (nil) or mutex (nil Mutex), with nothing sent; coordination.ErrBadState
// (wrong Redis type, or a value that is not an owner token: nothing
// written to the lock key); the hook's error; an error wrapping
// coordination.ErrClosed after Shutdown; Redis and network errors. It is
// safe for concurrent use.
func (m *Mutex) ForceRelease(ctx context.Context, token string) (bool, error) {
	if err := m.check(); err != nil {
		return false, engine.OpError(hooks.LockForceRelease, engine.Keys{}, err)
	}
	if err := check.Token(token, layout.IsToken); err != nil {
		return false, engine.OpError(hooks.LockForceRelease, m.keys, err)
	}
	args := func(context.Context) ([]any, error) { return []any{token}, nil }
	// When the release removed nothing, the holder read tells a value that
	// is not an owner token (ErrBadState) from another owner's.
	refused := func(ctx context.Context) error {
		_, err := holderScript.Run(ctx, m.e, m.keys.First())
		return err
	}
	if m.fifo != nil {
		return m.e.ForceRelease(ctx, hooks.LockForceRelease, kind.Primitive, m.keys, fifoForceRelease, args, refused)
	}
	return m.e.ForceRelease(ctx, hooks.LockForceRelease, kind.Primitive, m.keys, forceReleaseScript, args, refused)
}

// Adopt returns the [FieldLease] that token holds on field, for a process
// that restarted and kept its lease's owner token: one script reads the
// field's value and remaining TTL (HPTTL) at one server instant (admitted
// as LEASE ADOPT). The returned lease is exactly an acquired one, whose
// local deadline is the remaining TTL measured from the instant before
// the script was sent; nothing is written and the TTL is not extended
// (see [Mutex.Adopt] for what to call next).
//
// Errors, named with the key and the field: coordination.ErrNotHeld when
// the field is free or held by another token (an answer);
// coordination.ErrInvalidArgument naming field, token, ctx or fieldSet,
// with nothing sent; coordination.ErrUnsupportedServer without hash-field
// expiration; coordination.ErrBadState when the key is not a hash, the
// field's value is no owner token, or the field has no TTL; the hook's
// error; coordination.ErrClosed after Shutdown; Redis and network errors.
// It is safe for concurrent use.
func (s *FieldSet) Adopt(ctx context.Context, field, token string) (*FieldLease, error) {
	if err := s.check(); err != nil {
		return nil, engine.OpError(hooks.LeaseAdopt, engine.Keys{}, err)
	}
	keys := s.keys.Field(field)
	if err := check.Key("field", field); err != nil {
		return nil, engine.OpError(hooks.LeaseAdopt, s.keys, err)
	}
	if err := check.Token(token, layout.IsToken); err != nil {
		return nil, engine.OpError(hooks.LeaseAdopt, keys, err)
	}
	h, err := s.e.AdoptHeld(ctx, hooks.LeaseAdopt, fieldKind, keys, []any{field, token}, func(ctx context.Context) (engine.ReadTTL, error) {
		r, err := fieldHolderScript.Run(ctx, s.e, keys, field)
		return engine.ReadTTL{Held: r.Held && r.Token == token, TTL: r.TTL}, err
	})
	if err != nil {
		return nil, err
	}
	l := &FieldLease{field: field}
	engine.InitLease(&l.Lease, s.key, token, h)
	return l, nil
}

// Holder reads who holds the named lease field and its remaining TTL on
// the server (the field's HPTTL), in one round trip (admitted as LEASE
// READ), writing nothing; see [Mutex.Holder] for the shape. Errors, named
// with the key and the field: coordination.ErrNotHeld when the field is
// free; coordination.ErrInvalidArgument naming field, ctx or fieldSet,
// nothing sent; coordination.ErrUnsupportedServer without hash-field
// expiration; coordination.ErrBadState when the key is not a hash or the
// field's value is no owner token; the hook's error;
// coordination.ErrClosed after Shutdown; Redis and network errors. It is
// safe for concurrent use.
func (s *FieldSet) Holder(ctx context.Context, field string) (coordination.Holder, error) {
	if err := s.check(); err != nil {
		return coordination.Holder{}, engine.OpError(hooks.LeaseRead, engine.Keys{}, err)
	}
	if err := check.Key("field", field); err != nil {
		return coordination.Holder{}, engine.OpError(hooks.LeaseRead, s.keys, err)
	}
	return readHolder(ctx, s.e, hooks.LeaseRead, s.keys.Field(field), fieldHolderScript, field)
}

// ForceRelease deletes the named lease field if token holds it, whoever
// calls, admitted once as LEASE FORCE RELEASE, in two round trips: the
// holder's read (as [FieldSet.Holder]: a hash with a key-level TTL, not a
// field-lease hash, is refused with coordination.ErrBadState and left as
// it was), then the holder's own release, waking the field's blocked
// acquirers as the holder's release does; see [Mutex.ForceRelease] for
// the semantics (true: deleted; false: token did not hold it, nothing
// sent after the read; the release is sent at most once). Errors are those of
// [FieldSet.Holder], with coordination.ErrInvalidArgument naming token for
// a malformed one.
func (s *FieldSet) ForceRelease(ctx context.Context, field, token string) (bool, error) {
	if err := s.check(); err != nil {
		return false, engine.OpError(hooks.LeaseForceRelease, engine.Keys{}, err)
	}
	keys := s.keys.Field(field)
	if err := check.Key("field", field); err != nil {
		return false, engine.OpError(hooks.LeaseForceRelease, s.keys, err)
	}
	if err := check.Token(token, layout.IsToken); err != nil {
		return false, engine.OpError(hooks.LeaseForceRelease, keys, err)
	}
	// The holder read first: it refuses a hash that is not a field-lease
	// hash (a key-level TTL), as an acquisition does, before anything is
	// deleted.
	return s.e.ForceRelease(ctx, hooks.LeaseForceRelease, fieldKind.Primitive, keys, fieldForceRelease, func(ctx context.Context) ([]any, error) {
		h, err := fieldHolderScript.Run(ctx, s.e, keys, field)
		if err != nil || !h.Held || h.Token != token {
			return nil, err
		}
		return []any{field, token}, nil
	}, nil)
}
