package lock

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/engine"
)

// fieldKind is the named lease's lease kind: its hook names (LEASE ...),
// scripts (lease_*.lua) and instruments (coordination.lock.* with
// kind=lease). A lease's id is its field and its owner token.
var fieldKind = &engine.LeaseKind{
	Primitive: "lock",
	AcquireOp: hooks.LeaseAcquire, RenewOp: hooks.LeaseRenew, VerifyOp: hooks.LeaseVerify, ReleaseOp: hooks.LeaseRelease,
	Acquire: engine.LeaseAcquire, Refresh: engine.LeaseRefresh, Verify: engine.LeaseVerify, Release: engine.LeaseRelease,
	ReleaseMark: true,
	Metrics:     engine.LockMetrics,
	Attrs:       []attribute.KeyValue{attribute.String("kind", "lease")},
}

// FieldLease is a held named lease: one field of a hash, holding this
// owner's token, with its own expiry (see "Named leases in hash fields" in
// the package documentation). It is returned by [TryAcquireField] and
// [AcquireField] and is safe for concurrent use by multiple goroutines. A
// nil *FieldLease reports not held.
type FieldLease struct {
	key, field, token string
	h                 *engine.Handle
}

// TryAcquireField takes the named lease field in the hash at key for ttl
// if no one holds it, in one round trip, and returns at once. Other
// fields of the hash are other leases: they are neither read nor changed.
//
// key and field are any non-empty bytes; key is given without the
// coordinator's prefix. ttl is rounded up to whole milliseconds and must be
// at least 1 ms. The field expires on the server ttl after the script ran
// unless refreshed ([FieldLease.Refresh], [FieldLease.KeepAlive]).
//
// Errors: coordination.ErrNotAcquired when another owner holds the field;
// coordination.ErrUnsupportedServer when the server lacks hash-field
// expiration (Redis before 7.4, Valkey before 9.0, miniredis), before
// anything is written; coordination.ErrInvalidArgument (naming coord, key,
// field or ttl) for bad input, with nothing sent; an error matching
// coordination.ErrWrongType when key holds something other than a hash,
// and coordination.ErrBadState when the hash has a key-level TTL (which
// would end every lease in it), both with nothing written; the hook's error
// when a hook rejects; Redis and network errors as go-redis returns them.
// When the outcome is ambiguous (see coordination.IsAmbiguous) the lease
// may have been taken on the server: a background owner-checked release
// removes it.
func TryAcquireField(ctx context.Context, coord *coordination.Coordinator, key, field string, ttl time.Duration) (*FieldLease, error) {
	return acquireField(ctx, coord, key, field, ttl, false)
}

// AcquireField takes the named lease field in the hash at key for ttl,
// waiting as long as ctx allows. It does not poll: after a contended
// attempt it subscribes to the field's release notifications (a channel of
// its own, so releases of other fields do not wake it; one Pub/Sub
// connection per coordinator, shared by every waiter), tries once more,
// then sleeps until the field is released or its TTL (as the server
// reported it) runs out, re-checking at least every 5 s in case a
// notification was lost. Transient Redis errors (see coordination.Classify)
// are retried with jittered backoff.
//
// AcquireField is admitted through hooks once, as LEASE ACQUIRE, however
// long it waits. When ctx ends first it returns an error matching both
// coordination.ErrNotAcquired and ctx's error (context.Cause). Other errors
// are those of [TryAcquireField]; coordination.ErrUnsupportedServer comes
// at once, without waiting.
func AcquireField(ctx context.Context, coord *coordination.Coordinator, key, field string, ttl time.Duration) (*FieldLease, error) {
	return acquireField(ctx, coord, key, field, ttl, true)
}

func acquireField(ctx context.Context, coord *coordination.Coordinator, key, field string, ttl time.Duration, block bool) (*FieldLease, error) {
	e, err := engine.Of(coord)
	if err != nil {
		return nil, err
	}
	if err := engine.CheckKey("key", key); err != nil {
		return nil, err
	}
	if err := engine.CheckKey("field", field); err != nil {
		return nil, err
	}
	if _, err := engine.Millis("ttl", ttl); err != nil {
		return nil, err
	}
	token, err := engine.NewToken()
	if err != nil {
		return nil, err
	}
	keys := e.Key(key)
	h, _, err := e.Acquire(ctx, &engine.AcquireRequest{
		Kind: fieldKind, Keys: keys, ID: []any{field, token}, TTL: ttl, Block: block,
		WaitKey: engine.FieldWaitKey(keys.Full()[0], field),
	})
	if err != nil {
		return nil, err
	}
	return &FieldLease{key: key, field: field, token: token, h: h}, nil
}

func (l *FieldLease) handle() *engine.Handle {
	if l == nil {
		return nil
	}
	return l.h
}

// Key returns the hash's key as given (without the coordinator's prefix).
func (l *FieldLease) Key() string {
	if l == nil {
		return ""
	}
	return l.key
}

// Field returns the lease's field (its name in the hash).
func (l *FieldLease) Field() string {
	if l == nil {
		return ""
	}
	return l.field
}

// Token returns the owner token stored as the field's value: 36
// characters, random (UUID v4). It identifies this holder.
func (l *FieldLease) Token() string {
	if l == nil {
		return ""
	}
	return l.token
}

// Remaining returns the local estimate of the time the lease is still
// held: the TTL measured from the instant before the last successful
// acquire or refresh request was sent, minus a drift allowance (1% of the
// TTL plus 2 ms). It returns 0 once the lease is released, lost or locally
// expired, without asking Redis.
func (l *FieldLease) Remaining() time.Duration { return l.handle().Remaining() }

// Context returns a context that is cancelled when the lease is released
// (context.Cause is coordination.ErrReleased), lost, or its local deadline
// passes (the cause matches coordination.ErrLost). Run protected work under
// it. It is created on the first call. A nil *FieldLease returns an
// already-cancelled context (cause coordination.ErrNotHeld).
// Its Deadline is the local deadline (where [FieldLease.Remaining] reaches zero),
// moving later with each successful renewal, so a database or HTTP client
// given the context bounds its own request by the lease; a lease without
// expiry has no deadline.
func (l *FieldLease) Context() context.Context { return l.handle().Context() }

// Done returns Context().Done(): a channel closed when the lease is
// released, lost, or expires locally.
func (l *FieldLease) Done() <-chan struct{} { return l.handle().Context().Done() }

// Refresh sets the field to expire ttl from now if this owner still holds
// it, in one round trip (admitted as LEASE RENEW). Only the field's expiry
// changes (HPEXPIRE; its value is never rewritten, so its TTL is never
// dropped). It returns false when the lease was lost (expired, or taken by
// another owner); the handle is then lost and its context cancelled. An
// expired owner's Refresh never touches the next owner's field. After the
// handle is released or lost, Refresh returns false without asking Redis.
//
// Errors: coordination.ErrInvalidArgument for ttl < 1 ms (nothing sent);
// coordination.ErrBadState when the hash has been given a key-level TTL
// meanwhile (nothing written); Redis and network errors, which leave the
// handle held (its local deadline still applies, shortened to what ttl
// gives when the refresh may have run).
func (l *FieldLease) Refresh(ctx context.Context, ttl time.Duration) (bool, error) {
	return l.handle().Refresh(ctx, ttl)
}

// Verify reports whether this owner holds the field at the instant the
// script runs (one round trip, admitted as LEASE VERIFY; nothing is
// changed). A false answer marks the handle lost; an error changes
// nothing.
func (l *FieldLease) Verify(ctx context.Context) (bool, error) { return l.handle().Verify(ctx) }

// Release deletes the field if this owner holds it and wakes the field's
// waiters, in one round trip (admitted as LEASE RELEASE); the hash goes
// with its last field. It returns Released; AlreadyReleased when the field
// already expired, or this handle released it before (then without asking
// Redis); NotOwned when another owner holds it now (nothing is changed).
// Other fields are never touched.
//
// The handle counts as released from the moment Release is called: its
// context is cancelled (cause coordination.ErrReleased) and its keep-alive
// stops. When the release fails with a transient error or a cancelled ctx,
// the error is returned and the owner-checked release is retried in the
// background until it gets an answer or the lease's TTL has passed; a
// terminal error (NOPERM) leaves the field to expire at its TTL.
func (l *FieldLease) Release(ctx context.Context) (coordination.ReleaseOutcome, error) {
	out, err := l.handle().Release(ctx)
	return coordination.ReleaseOutcome(out), err
}

// KeepAlive starts renewing the lease in the background every TTL/3 until
// it is released or lost, exactly like [Lock.KeepAlive]: a renewal that
// finds the field gone or taken, a terminal error (a key-level TTL given to
// the hash, for one), or the local deadline passing while transient errors
// persist ends the keep-alive and cancels [FieldLease.Context] with a cause
// matching coordination.ErrLost. Renewals are not admitted through hooks.
// KeepAlive returns at once; calling it again does nothing.
func (l *FieldLease) KeepAlive() { l.handle().KeepAlive() }
