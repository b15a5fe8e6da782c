package fencing

import (
	"context"
	"strconv"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/engine"
)

const primitive = "fencing"

// GuardedSet writes value at the fenced resource key only if token is not
// older than the newest fencing token the resource has accepted, atomically
// in one round trip (admitted as FENCED WRITE). The resource is a hash
// {fence, value} at key, separate from the lock's keys; writers that
// coordinate through one lock use one resource key.
//
// Equal tokens are accepted, so one holder can write many times. It returns
// accepted=true and current=token when written, or accepted=false and the
// newer token the resource holds when rejected (nothing is changed). ttl is
// the resource key's expiry (rounded up to ms); 0 means no expiry.
//
// This is the Redis-side half of fencing: a lock holder that paused past
// its lease (GC, VM migration, network partition) and writes after a
// successor has written is rejected here even though it still believes it
// holds the lock. For a SQL resource use the same rule in the write itself:
//
//	UPDATE accounts SET balance = $1, fence = $2 WHERE id = $3 AND fence <= $2
//
// and treat zero affected rows as a stale-token rejection.
//
// A TTL makes the resource forget its fence when it expires: after that,
// a writer with any token, however old, is accepted again. Give resources
// that fence writes a TTL longer than any holder can be paused, or none.
//
// Errors: coordination.ErrInvalidArgument (nothing sent) for an empty key,
// token < 1 or ttl < 0 or between 0 and 1 ms; coordination.ErrWrongType
// when key is not a hash, and coordination.ErrBadState when it is a hash
// that GuardedSet did not write (other fields, no or a malformed fence):
// nothing is changed then. Redis and network errors as go-redis returns
// them. The write is idempotent under a re-send.
func GuardedSet(ctx context.Context, coord *coordination.Coordinator, key string, token int64, value []byte, ttl time.Duration) (accepted bool, current int64, err error) {
	e, err := engine.Of(coord)
	if err != nil {
		return false, 0, err
	}
	if err := engine.CheckKey("key", key); err != nil {
		return false, 0, err
	}
	if token < 1 {
		return false, 0, engine.InvalidArgument("token", "must be a positive fencing token, got %d", token)
	}
	if err := engine.CheckSize("value", len(value), engine.MaxValueBytes); err != nil {
		return false, 0, err
	}
	var ttlMs int64
	if ttl != 0 {
		if ttlMs, err = engine.Millis("ttl", ttl); err != nil {
			return false, 0, err
		}
	}
	ctx, op, err := e.Admit(ctx, hooks.FencedWrite, primitive)
	if err != nil {
		return false, 0, err
	}
	w, err := engine.FencingGuardedSet.Run(ctx, e, e.Key(key), strconv.FormatInt(token, 10), value, ttlMs)
	return w.Accepted, w.Current, op.End(err)
}

// GuardedGet reads a resource written by [GuardedSet]: its value and the
// fencing token of the write that stored it (admitted as FENCED READ).
// found is false (with no error) when the resource does not exist.
//
// Errors: coordination.ErrInvalidArgument for an empty key (nothing sent);
// coordination.ErrWrongType when key is not a hash; coordination.ErrBadState
// when it is a hash GuardedSet did not write (no fence, or one that is not
// a positive integer); Redis and network errors.
func GuardedGet(ctx context.Context, coord *coordination.Coordinator, key string) (value []byte, token int64, found bool, err error) {
	e, err := engine.Of(coord)
	if err != nil {
		return nil, 0, false, err
	}
	if err := engine.CheckKey("key", key); err != nil {
		return nil, 0, false, err
	}
	ctx, op, err := e.Admit(ctx, hooks.FencedRead, primitive)
	if err != nil {
		return nil, 0, false, err
	}
	g, err := engine.FencingGuardedGet.Run(ctx, e, e.Key(key))
	if err != nil || !g.Found {
		return nil, 0, false, op.End(err)
	}
	return []byte(g.Value), g.Token, true, op.End(nil)
}
