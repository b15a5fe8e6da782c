// Package fencelock is the fencing-token lock's implementation and storage
// layout, shared by package fencing (the public operations, admitted
// through hooks by [Acquire] and the handle) and package leader, a
// primitive built on the fencing lock, which takes and gives back its
// term's lease through the unadmitted entry points [Attempt] and
// [Release], so that each of its public operations is admitted once, as
// its own (a campaign attempt as LEADER CAMPAIGN).
//
// Layout: the lease key is a hash {owner, fence[, holder]} with a TTL; the
// counter is a field named after the counter key (prefixed) in the shared
// counter hash of the keys' Cluster slot (fencingcore.SharedKey), holding a
// non-negative integer, with no TTL. An earlier version's counter (a string
// at the counter key) is folded in by the first acquisition. All three keys
// are in one Cluster slot.
package fencelock

import (
	"context"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/decode"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/fencingcore"
	"github.com/coordkit/coordination/internal/lockcore"
)

// Kind is the fencing-token lock's lease kind (coordination.lock.* with
// kind=fencing).
var Kind = &engine.LeaseKind{
	Primitive: "fencing",
	AcquireOp: hooks.FencedLockAcquire, RenewOp: hooks.FencedLockRenew, VerifyOp: hooks.FencedLockVerify, ReleaseOp: hooks.FencedLockRelease,
	Acquire: fencingcore.Acquire, Refresh: fencingcore.Refresh, Verify: fencingcore.Verify, Release: fencingcore.Release,
	Abandon:    fencingcore.Abandon,
	HandleKeys: 1,
	Metrics:    lockcore.Metrics,
	Attrs:      []attribute.KeyValue{attribute.String("kind", "fencing")},
}

// Keys validates a fencing lock's keys, without sending anything, and
// returns them with the shared counter hash of their slot: errors
// wrap ErrInvalidArgument for an empty key or the same key twice, and
// ErrInvalidArgument naming the slots when the prefixed keys are in
// different Cluster slots.
func Keys(e *engine.Engine, leaseKey, fenceKey string) (engine.Keys, error) {
	if err := check.Key("leaseKey", leaseKey); err != nil {
		return engine.Keys{}, err
	}
	if err := check.Key("fenceKey", fenceKey); err != nil {
		return engine.Keys{}, err
	}
	if leaseKey == fenceKey {
		return engine.Keys{}, check.InvalidArgument("fenceKey", "must differ from leaseKey")
	}
	return fencingcore.Keys(e, []string{"leaseKey", "fenceKey"}, leaseKey, fenceKey)
}

// Request is one acquisition.
type Request struct {
	Keys   engine.Keys // from [Keys]
	TTL    time.Duration
	Holder string // stored in the lease's holder field; empty for none
	Block  bool
}

// Acquire takes the lock as r describes, admitted through the
// coordinator's hooks once as FENCED LOCK ACQUIRE (package fencing's
// TryAcquire and Acquire), and returns its handle, owner token and
// fencing token. The handle's own operations (Refresh, Verify, Release,
// KeepAlive) are admitted as FENCED LOCK RENEW, VERIFY and RELEASE.
func Acquire(ctx context.Context, e *engine.Engine, r Request) (*engine.Handle, string, int64, error) {
	return acquire(ctx, e, r, func(ctx context.Context, ar *engine.AcquireRequest) (*engine.Handle, decode.Grant, error) {
		return e.Acquire(ctx, ar)
	})
}

// Attempt is [Acquire] for a primitive built on the fencing lock, as part
// of op, the caller's own operation admitted by e (leader admits each campaign
// attempt as LEADER CAMPAIGN); nothing is admitted again. Give the lease
// back with [Release], not with the handle's admitted Release.
func Attempt(ctx context.Context, e *engine.Engine, op engine.Op, r Request) (*engine.Handle, string, int64, error) {
	return acquire(ctx, e, r, op.Acquire)
}

// Release gives back the lease of h, a handle [Attempt] returned, with the
// owner-checked release of every handle (a failed release is retried in
// the background until the lease's TTL), for a primitive built on the
// fencing lock; not admitted through hooks (leader releases its term's
// lease as part of Run, which is admitted as its own operations).
func Release(ctx context.Context, h *engine.Handle) (decode.Outcome, error) {
	return h.GiveBack(ctx)
}

func acquire(ctx context.Context, e *engine.Engine, r Request, run func(context.Context, *engine.AcquireRequest) (*engine.Handle, decode.Grant, error)) (*engine.Handle, string, int64, error) {
	token, err := engine.NewToken()
	if err != nil {
		return nil, "", 0, err
	}
	var extra []any
	if r.Holder != "" {
		extra = []any{r.Holder}
	}
	h, g, err := run(ctx, &engine.AcquireRequest{
		Kind: Kind, Keys: r.Keys, ID: []any{token}, TTL: r.TTL, Extra: extra,
		Block: r.Block,
	})
	if err != nil {
		return nil, "", 0, err
	}
	fence, _ := strconv.ParseInt(g.Value, 10, 64) // checked by the decoder
	if fencingcore.NoteFence(e, r.Keys.Full()[1], fence) {
		// Not silent: the counter went back and this token may have been
		// handed out before. The resource's check (newest token wins) is
		// what keeps a stale holder out.
		e.Count(fencingcore.CounterResets, nil)
		e.Logger().Warn("coordination: fencing counter went back; tokens may repeat (restart without persistence, failover, eviction or FLUSHALL)")
	}
	return h, token, fence, nil
}

// Read reports who holds the lease at the prefixed key k, in one round trip,
// unadmitted.
func Read(ctx context.Context, e *engine.Engine, k engine.Keys) (fencingcore.Holder, error) {
	return fencingcore.Read.Run(ctx, e, k)
}
