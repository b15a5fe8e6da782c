package lock

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/lockcore"
)

// fieldKind is the named lease's lease kind: its hook names (LEASE ...),
// scripts (lease_*.lua) and instruments (coordination.lock.* with
// kind=lease). A lease's id is its field and its owner token.
var fieldKind = &engine.LeaseKind{
	Primitive: "lock",
	AcquireOp: hooks.LeaseAcquire, RenewOp: hooks.LeaseRenew, VerifyOp: hooks.LeaseVerify, ReleaseOp: hooks.LeaseRelease,
	Acquire: fieldAcquire, Refresh: fieldRefresh, Verify: fieldVerify, Release: fieldRelease,
	Abandon: fieldAbandon,
	Metrics: lockcore.Metrics,
	Attrs:   []attribute.KeyValue{attribute.String("kind", "lease")},
}

// FieldSet is one hash key holding many named leases, one per field (see
// "Named leases in hash fields" in the package documentation): a value with
// no state of its own on the client, created by [NewFieldSet] without I/O.
// Each successful [FieldSet.TryAcquire] or [FieldSet.Acquire] returns a new
// [FieldLease] (with a new owner token) on the field it names, so one
// FieldSet serves any number of acquisitions of any fields. A FieldSet is
// safe for concurrent use by multiple goroutines.
type FieldSet struct {
	e    *engine.Engine
	key  string      // as given to NewFieldSet, without the prefix
	keys engine.Keys // key, prefixed once
	full string      // the prefixed key, for the fields' wait channels
}

// NewFieldSet returns the set of named leases in the hash at key (without
// the coordinator's prefix; any non-empty bytes, at most 1 KiB). It sends
// nothing to Redis; whether the server has hash-field expiration is learnt
// at the first acquisition.
//
// It returns an error wrapping coordination.ErrInvalidArgument, naming the
// argument, when coord is nil (or not made by coordination.New) or key is
// empty or too long.
func NewFieldSet(coord *coordination.Coordinator, key string) (*FieldSet, error) {
	e, err := engine.Of(coord)
	if err != nil {
		return nil, err
	}
	if err := check.Key("key", key); err != nil {
		return nil, err
	}
	keys := e.Key(key)
	return &FieldSet{e: e, key: key, keys: keys, full: keys.Full()[0]}, nil
}

// check returns an error wrapping coordination.ErrInvalidArgument for a nil
// or zero FieldSet, which [NewFieldSet] never returns.
func (s *FieldSet) check() error {
	if s == nil || s.e == nil {
		return check.InvalidArgument("fieldSet", "must not be nil; use lock.NewFieldSet")
	}
	return nil
}

// Key returns the hash's key as given to [NewFieldSet] (without the
// coordinator's prefix).
func (s *FieldSet) Key() string {
	if s == nil {
		return ""
	}
	return s.key
}

// FieldLease is a held named lease: one field of a hash, holding this
// owner's token, with its own expiry (see "Named leases in hash fields" in
// the package documentation). It is returned by [FieldSet.TryAcquire] and
// [FieldSet.Acquire] and is safe for concurrent use by multiple goroutines.
// Its lease methods are those of the embedded [coordination.Lease],
// admitted through hooks as LEASE RENEW, VERIFY and RELEASE; the
// field holds [coordination.Lease.Token].
type FieldLease struct {
	coordination.Lease
	field string
}

// TryAcquire takes the named lease field in the set's hash for ttl if no
// one holds it, in one round trip, and returns at once. It never waits.
// Other fields of the hash are other leases: they are neither read nor
// changed.
//
// field is any non-empty bytes, at most 1 KiB. ttl is rounded up to whole
// milliseconds and must be at least 1 ms. The field expires on the server
// ttl after the script ran unless refreshed ([coordination.Lease.Refresh],
// [coordination.Lease.KeepAlive]).
//
// Errors: coordination.ErrNotAcquired when another owner holds the field;
// coordination.ErrUnsupportedServer when the server lacks hash-field
// expiration (Redis before 7.4, Valkey before 9.0, miniredis), before
// anything is written; coordination.ErrInvalidArgument (naming ctx, field,
// ttl, or fieldSet for a nil FieldSet) for bad input, with nothing sent; an
// error matching coordination.ErrBadState when the key holds something
// other than a hash, and coordination.ErrBadState when the hash has a
// key-level TTL (which would end every lease in it) or the field is held
// by another owner without a TTL (HPERSISTed, or written by someone else:
// its holder would never leave, so Acquire returns this at once), all with
// nothing written; the hook's error when a hook rejects; an error wrapping
// coordination.ErrClosed after the coordinator's Shutdown began; Redis and
// network errors as go-redis returns them. When the outcome is ambiguous
// (see coordination.IsAmbiguous) the lease may have been taken on the
// server: a background owner-checked release removes it. Errors name the
// key and the field (`coordination: lease acquire "fs" field "a": not
// acquired`), as do the errors of the lease's own methods.
func (s *FieldSet) TryAcquire(ctx context.Context, field string, ttl time.Duration) (*FieldLease, error) {
	return s.acquire(ctx, field, ttl, false)
}

// Acquire takes the named lease field in the set's hash for ttl, waiting
// as long as ctx allows. It does not poll: after a contended attempt it
// subscribes to the field's release notifications (a channel of its own,
// so releases of other fields do not wake it; one Pub/Sub connection per
// coordinator, shared by every waiter), tries once more, then sleeps until
// the field is released or its TTL (as the server reported it) runs out,
// re-checking at least every 5 s in case a notification was lost.
// Transient Redis errors (see coordination.IsTransient) are retried with
// jittered backoff.
//
// Acquire is admitted through hooks once, as LEASE ACQUIRE, however long
// it waits. When ctx ends first it returns an error matching both
// coordination.ErrNotAcquired and ctx's error (context.Cause) when Redis answered
// its last attempt (an outage instead: see coordination.ErrNotAcquired). Other errors
// are those of [FieldSet.TryAcquire]; coordination.ErrUnsupportedServer
// comes at once, without waiting.
func (s *FieldSet) Acquire(ctx context.Context, field string, ttl time.Duration) (*FieldLease, error) {
	return s.acquire(ctx, field, ttl, true)
}

func (s *FieldSet) acquire(ctx context.Context, field string, ttl time.Duration, block bool) (*FieldLease, error) {
	if err := s.check(); err != nil {
		return nil, engine.OpError(fieldKind.AcquireOp, engine.Keys{}, err)
	}
	if err := check.Key("field", field); err != nil {
		return nil, engine.OpError(fieldKind.AcquireOp, s.keys, err)
	}
	// The engine refuses a bad ttl, naming the operation, the key and the field.
	token, err := engine.NewToken()
	if err != nil {
		return nil, err
	}
	h, _, err := s.e.Acquire(ctx, &engine.AcquireRequest{
		Kind: fieldKind, Keys: s.keys.Field(field), ID: []any{field, token}, TTL: ttl, Block: block,
		WaitKey: s.full, WaitPart: fieldWaitPart(field),
	})
	if err != nil {
		return nil, err
	}
	l := &FieldLease{field: field}
	engine.InitLease(&l.Lease, s.key, token, h)
	return l, nil
}

// Field returns the lease's field (its name in the hash).
func (l *FieldLease) Field() string {
	if l == nil {
		return ""
	}
	return l.field
}
