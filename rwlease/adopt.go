package rwlease

import (
	"context"
	"strings"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/decode"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/layout"
)

// The scripts of adopting, reading and force-releasing a read or write
// lease: the holders' read, and the holder's own release (waking waiters
// as the holder's release does), sent at most once.
var (
	holdersScript      = engine.NewScript("rwlease_holders", decodeHolders)
	forceReleaseScript = engine.NewScript("rwlease_release", decodeRelease).Once()
)

// decodeHolders reads rwlease_holders' reply: every member R:<token> or
// W:<token> with a TTL >= 1 ms.
func decodeHolders(v any) ([]decode.Entry, bool) {
	es, ok := decode.Entries(v, false)
	if !ok {
		return nil, false
	}
	for _, e := range es {
		if !(strings.HasPrefix(e.Member, "R:") || strings.HasPrefix(e.Member, "W:")) || !layout.IsToken(e.Member[2:]) {
			return nil, false
		}
	}
	return es, true
}

// find returns the entry of token among es.
func find(es []decode.Entry, token string) (decode.Entry, bool) {
	for _, e := range es {
		if e.Member[2:] == token {
			return e, true
		}
	}
	return decode.Entry{}, false
}

// Adopt returns the [Lease] that token holds on the key, in either mode,
// for a process that restarted (or any other) and kept its lease's owner
// token ([coordination.Lease.Token]): one script lists the key's live
// holders at one server instant (admitted as RWLEASE ADOPT; its cost grows
// with the number of live holders). When token holds a read or write
// lease, the returned Lease is exactly an acquired one, with its
// [Lease.Mode], whose local deadline is the remaining TTL measured from
// the instant before the script was sent (less the drift allowance).
// Adopt writes nothing and does not extend the TTL: call
// [coordination.Lease.Refresh] with the lease's usual TTL (then
// [coordination.Lease.KeepAlive], which renews to the last TTL set: the
// remaining TTL read, until a Refresh). Adopt a token in one process only.
//
// Errors name the operation and the key and wrap: coordination.ErrNotHeld
// when token holds no live lease on the key (a waiting writer's marker is
// not a lease; an answer: hooks learn Succeeded);
// coordination.ErrInvalidArgument naming token (not an owner token: 22
// characters of base64url), ctx (nil) or rwmutex (nil RWMutex), nothing
// sent; an error matching coordination.ErrBadState when the key is not a
// sorted set or holds a live entry outside the layout; the hook's error;
// coordination.ErrClosed after Shutdown; Redis and network errors. It is
// safe for concurrent use.
func (m *RWMutex) Adopt(ctx context.Context, token string) (*Lease, error) {
	if err := m.check(); err != nil {
		return nil, engine.OpError(hooks.RWLeaseAdopt, engine.Keys{}, err)
	}
	if err := check.Token(token, layout.IsToken); err != nil {
		return nil, engine.OpError(hooks.RWLeaseAdopt, m.keys, err)
	}
	l := &Lease{}
	h, err := m.e.AdoptHeld(ctx, hooks.RWLeaseAdopt, readKind, m.keys, nil, func(ctx context.Context) (engine.ReadTTL, error) {
		es, err := holdersScript.Run(ctx, m.e, m.keys)
		e, ok := find(es, token)
		if err != nil || !ok {
			return engine.ReadTTL{}, err
		}
		r := engine.ReadTTL{Held: true, TTL: e.TTL, Kind: readKind, ID: []any{e.Member}}
		l.mode = ReadMode
		if e.Member[0] == 'W' {
			r.Kind, l.mode = writeKind, WriteMode
		}
		return r, nil
	})
	if err != nil {
		return nil, err
	}
	engine.InitLease(&l.Lease, m.key, token, h)
	return l, nil
}

// Holders lists the key's live holders, in one round trip (one script,
// admitted as RWLEASE READ), writing nothing: each holder's Token,
// Remaining (its entry's remaining TTL, whole milliseconds) and Shared
// (true for a read lease, false for the write lease), earliest expiry
// first; none (an empty slice, no error) when no one holds the key.
// Waiting writers are not holders. The answer may be stale by the time it
// returns. Its cost grows with the number of live holders.
//
// Errors name the operation and the key and wrap:
// coordination.ErrInvalidArgument naming ctx (nil) or rwmutex (nil
// RWMutex), nothing sent; an error matching coordination.ErrBadState when
// the key is not a sorted set or holds a live entry outside the layout;
// the hook's error; coordination.ErrClosed after Shutdown; Redis and
// network errors. It is safe for concurrent use.
func (m *RWMutex) Holders(ctx context.Context) ([]coordination.Holder, error) {
	if err := m.check(); err != nil {
		return nil, engine.OpError(hooks.RWLeaseRead, engine.Keys{}, err)
	}
	ctx, op, err := m.e.Admit(ctx, hooks.RWLeaseRead, primitive, m.keys)
	if err != nil {
		return nil, err
	}
	es, err := holdersScript.Run(ctx, m.e, m.keys)
	if err != nil {
		return nil, op.End(err)
	}
	out := make([]coordination.Holder, len(es))
	for i, e := range es {
		out[i] = coordination.Holder{Token: e.Member[2:], Remaining: e.TTL, Shared: e.Member[0] == 'R'}
	}
	return out, op.End(nil)
}

// ForceRelease removes token's read or write lease (and, for a writer, its
// waiting marker) whoever calls, for an administrator who read the
// holders with [RWMutex.Holders] first: naming the token never removes
// another holder. It wakes blocked acquirers exactly as the holder's
// release does (they take the lease at once when nothing else is in the
// way), and reports true when it removed a live lease, false when token
// held none (nothing changed). Admitted once as RWLEASE FORCE RELEASE, it
// costs two round trips: the holders' read that finds token's entry (its
// mode), then the holder's own release script for it, which is sent at
// most once: after a lost reply (coordination.IsAmbiguous) it is not sent
// again; read the holders again. The forced holder's process learns of it
// at its next Refresh, Verify or renewal.
//
// Errors are those of [RWMutex.Holders], with
// coordination.ErrInvalidArgument naming token for a malformed one
// (nothing sent). It is safe for concurrent use.
func (m *RWMutex) ForceRelease(ctx context.Context, token string) (bool, error) {
	if err := m.check(); err != nil {
		return false, engine.OpError(hooks.RWLeaseForceRelease, engine.Keys{}, err)
	}
	if err := check.Token(token, layout.IsToken); err != nil {
		return false, engine.OpError(hooks.RWLeaseForceRelease, m.keys, err)
	}
	return m.e.ForceRelease(ctx, hooks.RWLeaseForceRelease, primitive, m.keys, forceReleaseScript, func(ctx context.Context) ([]any, error) {
		es, err := holdersScript.Run(ctx, m.e, m.keys)
		if e, ok := find(es, token); err == nil && ok {
			return []any{e.Member}, nil
		}
		return nil, err
	}, nil)
}
