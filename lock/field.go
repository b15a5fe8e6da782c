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
// [AcquireField] and is safe for concurrent use by multiple goroutines.
// Its lease methods are those of the embedded [coordination.Lease],
// admitted through hooks as LEASE RENEW, VERIFY and RELEASE; the
// field holds [coordination.Lease.Token].
type FieldLease struct {
	coordination.Lease
	field string
}

// TryAcquireField takes the named lease field in the hash at key for ttl
// if no one holds it, in one round trip, and returns at once. Other
// fields of the hash are other leases: they are neither read nor changed.
//
// key and field are any non-empty bytes; key is given without the
// coordinator's prefix. ttl is rounded up to whole milliseconds and must be
// at least 1 ms. The field expires on the server ttl after the script ran
// unless refreshed ([coordination.Lease.Refresh], [coordination.Lease.KeepAlive]).
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
	l := &FieldLease{field: field}
	engine.InitLease(&l.Lease, key, token, h)
	return l, nil
}

// Field returns the lease's field (its name in the hash).
func (l *FieldLease) Field() string {
	if l == nil {
		return ""
	}
	return l.field
}
