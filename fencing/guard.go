package fencing

import (
	"context"
	"strconv"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/engine"
)

const primitive = "fencing"

// Guarded is a value in Redis written only by the holder of the newest
// fencing token: the Redis-side half of fencing. It is a hash {fence,
// value} at its key, separate from the lock's keys; writers that coordinate
// through one lock use one Guarded key. Create it with [NewGuarded]; it
// holds no state besides its key, so any number of Guarded values (in any
// number of processes) may share a key. It is safe for concurrent use by
// multiple goroutines. The zero value is not usable.
type Guarded struct {
	e    *engine.Engine
	key  string
	keys engine.Keys // key, prefixed once
}

// NewGuarded returns the fenced resource at key (without the coordinator's
// prefix; any non-empty bytes). It sends nothing to Redis. The key need not share a
// Cluster slot with the lock's keys.
//
// It returns an error wrapping coordination.ErrInvalidArgument, naming the
// argument, when coord is nil or key is empty or longer than 1 KiB.
func NewGuarded(coord *coordination.Coordinator, key string) (*Guarded, error) {
	e, err := engine.Of(coord)
	if err != nil {
		return nil, err
	}
	if err := check.Key("key", key); err != nil {
		return nil, err
	}
	return &Guarded{e: e, key: key, keys: e.Key(key)}, nil
}

// check returns an error wrapping coordination.ErrInvalidArgument for a nil
// or zero Guarded, which [NewGuarded] never returns.
func (g *Guarded) check() error {
	if g == nil || g.e == nil {
		return check.InvalidArgument("guarded", "must not be nil; use fencing.NewGuarded")
	}
	return nil
}

// Key returns the resource's key as given to [NewGuarded] (without the
// coordinator's prefix).
func (g *Guarded) Key() string { return g.key }

// Set writes value only if token is not older than the newest fencing
// token the resource has accepted, atomically in one round trip (admitted
// as FENCED WRITE).
//
// Equal tokens are accepted, so one holder can write many times. It returns
// accepted=true and current=token when written, or accepted=false and the
// newer token the resource holds when rejected (nothing is changed). ttl is
// the resource key's expiry (rounded up to ms); 0 means no expiry.
//
// A lock holder that paused past its lease (GC, VM migration, network
// partition) and writes after a successor has written is rejected here
// even though it still believes it holds the lock. For a SQL resource use
// the same rule in the write itself:
//
//	UPDATE accounts SET balance = $1, fence = $2 WHERE id = $3 AND fence <= $2
//
// and treat zero affected rows as a stale-token rejection.
//
// A TTL makes the resource forget its fence when it expires: after that,
// a writer with any token, however old, is accepted again. Give resources
// that fence writes a TTL longer than any holder can be paused, or none.
//
// Errors: coordination.ErrInvalidArgument (nothing sent) for token < 1, a
// value longer than 16 MiB, ttl < 0 or between 0 and 1 ms, or a nil or zero
// Guarded; coordination.ErrBadState when the key is not a hash, and
// coordination.ErrBadState when it is a hash that Set did not write (other
// fields, no or a malformed fence): nothing is changed then; the hook's
// error when a hook rejects; Redis and network errors as go-redis returns
// them. It is sent at most once, whatever the client's retry setting: a
// reply lost after the write was sent is an error for which
// coordination.IsAmbiguous reports true (the write may have been applied:
// read the resource with Get), never a rejection it cannot vouch for (a
// re-send that found a newer token could not tell whether its first send
// had written).
func (g *Guarded) Set(ctx context.Context, token int64, value []byte, ttl time.Duration) (accepted bool, current int64, err error) {
	if err := g.check(); err != nil {
		return false, 0, engine.OpError(hooks.FencedWrite, engine.Keys{}, err)
	}
	ttlMs, err := setArgs(token, value, ttl)
	if err != nil {
		return false, 0, engine.OpError(hooks.FencedWrite, g.keys, err)
	}
	ctx, op, err := g.e.Admit(ctx, hooks.FencedWrite, primitive, g.keys)
	if err != nil {
		return false, 0, err
	}
	w, err := guardedSet.Run(ctx, g.e, g.keys, strconv.FormatInt(token, 10), value, ttlMs)
	return w.Accepted, w.Current, op.End(err)
}

// setArgs checks the arguments of [Guarded.Set] and returns the TTL in
// milliseconds (0: no expiry).
func setArgs(token int64, value []byte, ttl time.Duration) (int64, error) {
	if token < 1 {
		return 0, check.InvalidArgument("token", "must be a positive fencing token, got %d", token)
	}
	if err := check.Size("value", len(value), check.MaxValueBytes); err != nil {
		return 0, err
	}
	return check.TTLMillis(ttl, true)
}

// Get reads the resource written by [Guarded.Set]: its value and the
// fencing token of the write that stored it (admitted as FENCED READ).
// found is false (with no error) when the resource does not exist.
//
// Errors: coordination.ErrInvalidArgument for a nil or zero Guarded
// (nothing sent); coordination.ErrBadState when the key is not a hash;
// coordination.ErrBadState when it is a hash Set did not write (no fence,
// or one that is not a positive integer); the hook's error when a hook
// rejects; Redis and network errors.
func (g *Guarded) Get(ctx context.Context) (value []byte, token int64, found bool, err error) {
	if err := g.check(); err != nil {
		return nil, 0, false, engine.OpError(hooks.FencedRead, engine.Keys{}, err)
	}
	ctx, op, err := g.e.Admit(ctx, hooks.FencedRead, primitive, g.keys)
	if err != nil {
		return nil, 0, false, err
	}
	r, err := guardedGet.Run(ctx, g.e, g.keys)
	if err != nil || !r.Found {
		return nil, 0, false, op.End(err)
	}
	return []byte(r.Value), r.Token, true, op.End(nil)
}
