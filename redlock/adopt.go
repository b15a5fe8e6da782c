package redlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/decode"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/layout"
	"github.com/coordkit/coordination/internal/lockcore"
	"github.com/coordkit/coordination/internal/sentinel"
)

// The scripts of adopting, reading and force-releasing a Redlock, per
// node: a plain node's are package lock's (lock_holder; lock_abandon, the
// cleanup of an abandoned acquisition, which releases the token and
// leaves its tombstone for the lock's remaining TTL, so that the holder's
// next refresh, which re-takes a free node (redlock_refresh), finds the
// node taken and loses the lock), the fencing node's package fencing's
// (fencing_holder, fencing_release: a fencing node's refresh never
// re-takes it). Either wakes waiters as the holder's release does; it is
// sent at most once (a re-send after a lost reply could not tell its own
// release from the holder's).
var (
	fencingHolder = engine.NewScript("fencing_holder", decodeFencingHolder)
	forceLock     = engine.NewScript("lock_abandon", decode.Release).Once()
	forceFencing  = engine.NewScript("fencing_release", decode.Release).Once()
)

// holding is one node's holder: its owner token, remaining TTL
// (engine.NoExpiry for none) and, on the fencing node, fencing token.
type holding struct {
	Held  bool // false: free
	Token string
	Fence int64
	TTL   time.Duration
}

// decodeFencingHolder reads fencing_holder's reply: false (free) or
// {owner, fence, pttl_ms}, owner an owner token (possibly with the waiter
// mark '+'), fence a positive decimal, pttl_ms >= 0 or -1 (none; 0, the
// lease's last millisecond, reads as free). An owner
// that is a tombstone (token!) reads as free.
func decodeFencingHolder(v any) (holding, bool) {
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
	if ok1 && lockcore.IsTombstone(s) {
		return holding{}, true
	}
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

// holder reads who holds the key on node n, writing nothing.
func (n *node) holder(ctx context.Context, k engine.Keys) (holding, error) {
	if n.fencing {
		return fencingHolder.Run(ctx, n.e, k.First())
	}
	h, err := lockcore.Holder.Run(ctx, n.e, k.First())
	return holding{Held: h.Held, Token: h.Token, TTL: h.TTL}, err
}

// quorumTTL returns how long token holds a quorum, as the nodes' answers
// rs (state yes: the node answered, its holder in held) report: the
// longest TTL a quorum of the nodes holding token shares, i.e. the
// quorum-th longest of their remaining TTLs (with fencing: the fencing
// node among them, so at most its TTL), and the fencing node's fencing
// token. ok is false when fewer than a quorum (or not the fencing node)
// hold token. n is the number of nodes that hold it.
func (g *Group) quorumTTL(rs []result, token string) (ttl time.Duration, fence int64, n int, ok bool) {
	f := g.cfg.fencing
	var ttls []time.Duration
	holds := func(i int) bool { return rs[i].state == yes && rs[i].held.Held && rs[i].held.Token == token }
	for i := range rs {
		if holds(i) {
			n++
			if i != f {
				ttls = append(ttls, rs[i].held.TTL)
			}
		}
	}
	need := g.quorum
	if f >= 0 {
		if !holds(f) {
			return 0, 0, n, false
		}
		need-- // the fencing node is one of the quorum
	}
	if len(ttls) < need {
		return 0, 0, n, false
	}
	slices.SortFunc(ttls, func(a, b time.Duration) int { return int(min(max(b-a, -1), 1)) }) // longest first
	ttl = engine.NoExpiry
	if need > 0 {
		ttl = ttls[need-1]
	}
	if f >= 0 {
		ttl, fence = min(ttl, rs[f].held.TTL), rs[f].held.Fence
	}
	return ttl, fence, n, true
}

// read runs the holder read on every node and returns once every node
// answered, the node timeout passed, or no token (want, when not empty)
// can be held by a quorum any more. It waits for the nodes after a quorum
// answered, so that the quorum's TTL is the longest any quorum holds (see
// quorumTTL), the same whichever nodes answer first.
func (g *Group) read(ctx context.Context, op string, keys []engine.Keys, want string) *fanned {
	return g.fanOut(ctx, op, allNodes(len(g.nodes)), func(ctx context.Context, n *node) result {
		h, err := n.holder(ctx, keys[n.i])
		if err != nil {
			return result{state: failed, err: err}
		}
		return result{state: yes, held: h}
	}, func(rs []result, pend int) bool {
		best := 0
		for i := range rs {
			t := rs[i].held.Token
			if rs[i].state == yes && rs[i].held.Held && (want == "" || t == want) {
				_, _, n, _ := g.quorumTTL(rs, t)
				best = max(best, n)
			}
		}
		return best+pend < g.quorum
	})
}

// unread returns the error of a read that found no quorum for one token:
// a *QuorumError when failed nodes could have made the difference (the
// context's error when it ended first), else an error wrapping
// coordination.ErrNotHeld.
func (g *Group) unread(ctx context.Context, op string, f *fanned, token, what string) error {
	rs := f.rs
	if f.canceled {
		return fmt.Errorf("redlock: %s: %w", op, context.Cause(ctx))
	}
	best := 0
	for i := range rs {
		t := rs[i].held.Token
		if rs[i].state == yes && rs[i].held.Held && (token == "" || t == token) {
			_, _, n, _ := g.quorumTTL(rs, t)
			best = max(best, n)
		}
	}
	fi := g.cfg.fencing
	fencingAnswered := fi >= 0 && rs[fi].state == yes && (!rs[fi].held.Held || token != "" && rs[fi].held.Token != token)
	if best+count(rs, failed)+count(rs, pending) >= g.quorum && !fencingAnswered {
		return g.quorumError(op, rs, best)
	}
	return fmt.Errorf("redlock: %w: %s %d of %d nodes (a quorum)", sentinel.ErrNotHeld, what, g.quorum, len(g.nodes))
}

// Adopt returns the [Lock] that token holds at key on a quorum of the
// nodes, for a process that restarted (or any other) and kept its lock's
// owner token ([coordination.Lease.Token]): one script per node, in
// parallel and bounded by the node timeout as every round, reads the
// node's owner and remaining TTL at one server instant (admitted once as
// REDLOCK ADOPT); nothing is written and no TTL is extended. It waits for
// every node's answer (so a node that does not answer delays it by the
// node timeout), unless no quorum can hold token any more.
//
// The lock is held when a quorum of nodes (with [WithFencing], the fencing
// node among them) hold token, and the validity is computed as an
// acquisition's: the quorum's TTL is the quorum-th longest of the
// remaining TTLs of the nodes that hold token (with fencing, at most the
// fencing node's): the time until fewer than a quorum hold it; validity =
// that TTL - elapsed - drift, elapsed measured from before the first read
// to the decision, drift the group's allowance for that TTL
// ([WithDriftFactor] × TTL + 2 ms). The returned Lock is exactly an
// acquired one (Refresh, which also takes the key again on a node where it
// is free, Verify, KeepAlive, Release, Context, Remaining), with that
// validity, [Lock.TTL] the quorum's TTL (what KeepAlive renews to until a
// Refresh sets another) and, with fencing, the fencing token it was
// acquired with. Call [coordination.Lease.Refresh] with the lock's usual
// TTL before it runs out. Adopt a token in one process only.
//
// key is as given to [Group.TryAcquire]. Errors name REDLOCK ADOPT and the
// key and wrap: coordination.ErrNotHeld when fewer than a quorum of the
// nodes hold token (free, a tombstone, another owner's, or the validity
// used up while reading; an answer: hooks learn Succeeded);
// coordination.ErrInvalidArgument naming key, token (not an owner token:
// 22 characters of base64url), ctx (nil) or group (zero or nil Group),
// with nothing admitted or sent; coordination.ErrBadState when the quorum's
// keys have no TTL (PERSISTed by hand); a *[QuorumError] (Op "adopt") when
// failed nodes (errors, [ErrNodeTimeout], a node's key of the wrong type)
// left it undecided; the hook's error; an error wrapping
// coordination.ErrClosed after the Shutdown of any node's coordinator;
// ctx's error when it ends first. It is safe for concurrent use.
func (g *Group) Adopt(ctx context.Context, key, token string) (*Lock, error) {
	keys, err := g.keysFor(hooks.RedlockAdopt, key)
	if err != nil {
		return nil, err
	}
	if err := check.Token(token, layout.IsToken); err != nil {
		return nil, engine.OpError(hooks.RedlockAdopt, keys[0], err)
	}
	ctx, op, err := engine.AdmitGroup(ctx, g.ids, hooks.RedlockAdopt, "redlock", keys[0])
	if err != nil {
		return nil, err
	}
	start := time.Now()
	f := g.read(ctx, "adopt", keys, token)
	elapsed := time.Since(start)
	ttl, fence, _, ok := g.quorumTTL(f.rs, token)
	switch {
	case !ok || f.canceled:
		return nil, op.End(g.unread(ctx, "adopt", f, token, "the token is on fewer than"))
	case ttl == engine.NoExpiry:
		return nil, op.End(fmt.Errorf("redlock: %w: the quorum's keys have no TTL (written by hand); the lock cannot be adopted", sentinel.ErrBadState))
	}
	validity := ttl - elapsed - g.drift(ttl)
	if validity <= 0 {
		return nil, op.End(fmt.Errorf("redlock: %w: a quorum holds the token for %v, leaving no validity after %v and the drift allowance",
			sentinel.ErrNotHeld, ttl, elapsed.Round(time.Millisecond)))
	}
	l := newLock(g, key, token, keys, ttl, start, validity)
	l.fence = fence
	return l, op.End(nil)
}

// Holder reads who holds the lock at key: the holder read on every node,
// in parallel and bounded by the node timeout (one script per node,
// admitted once as REDLOCK READ), writing nothing, waiting for every
// node's answer (at most the node timeout) unless no quorum can hold one
// token any more. When a quorum of nodes agree on one owner token (with
// [WithFencing], the fencing node among them), it returns that token, its
// validity as
// Remaining (the quorum's TTL, computed as [Group.Adopt] does from the
// nodes' remaining TTLs, minus the drift allowance for it; at least 1 ms;
// the largest time.Duration when the quorum's keys have no TTL) and, with
// fencing, the fencing node's FencingToken; the other fields are zero. A
// tombstone a node keeps after an abandoned acquisition (token!) reads as
// free there. The answer may be stale by the time it returns.
//
// Errors name REDLOCK READ and the key and wrap: coordination.ErrNotHeld
// when no token is held by a quorum (free, or split between owners; an
// answer); coordination.ErrInvalidArgument naming key, ctx or group, with
// nothing sent; a *[QuorumError] (Op "read") when failed nodes left it
// undecided (a node's key of the wrong type or holding no owner token is
// such a failure, wrapping coordination.ErrBadState); the hook's error; an
// error wrapping coordination.ErrClosed after Shutdown; ctx's error when
// it ends first. It is safe for concurrent use.
func (g *Group) Holder(ctx context.Context, key string) (coordination.Holder, error) {
	keys, err := g.keysFor(hooks.RedlockRead, key)
	if err != nil {
		return coordination.Holder{}, err
	}
	ctx, op, err := engine.AdmitGroup(ctx, g.ids, hooks.RedlockRead, "redlock", keys[0])
	if err != nil {
		return coordination.Holder{}, err
	}
	f := g.read(ctx, "read", keys, "")
	if !f.canceled {
		for _, r := range f.rs {
			if r.state != yes || !r.held.Held {
				continue
			}
			if ttl, fence, _, ok := g.quorumTTL(f.rs, r.held.Token); ok {
				if ttl != engine.NoExpiry {
					ttl = max(ttl-g.drift(ttl), time.Millisecond)
				}
				return coordination.Holder{Token: r.held.Token, Remaining: ttl, FencingToken: fence}, op.End(nil)
			}
		}
	}
	return coordination.Holder{}, op.End(g.unread(ctx, "read", f, "", "no owner token is on"))
}

// ForceRelease removes token's lock at key from every node, whoever calls,
// for an administrator who read the holder with [Group.Holder] first:
// naming the token never removes a newer holder that took over meanwhile.
// On each node, in parallel and bounded by the node timeout, it runs an
// owner-checked release (admitted once as REDLOCK FORCE RELEASE), which
// wakes the blocked acquirers of [Group.Acquire] as the holder's release
// does. It waits for every node (at most the node
// timeout) and reports true when at least one node deleted token's lock,
// false when no node held it (nothing changed). Each node's release is sent
// at most once: a node whose reply was lost may or may not have released;
// read the holder again.
//
// The holder's process learns of it at its next Refresh, Verify or
// keep-alive renewal (its lock is then lost) or at its validity's end:
// each plain node keeps the token's tombstone for the lock's remaining
// TTL, so that the renewal, which re-takes a node where the key is free
// ([Lock]'s refresh heals a restarted node), cannot take it back; any
// other acquirer takes a tombstone over at once.
//
// Errors name REDLOCK FORCE RELEASE and the key and wrap:
// coordination.ErrInvalidArgument naming key, token, ctx or group, with
// nothing sent; a *[QuorumError] (Op "force release"; the boolean still
// reports whether a node that answered released) when fewer than a quorum
// of nodes answered (with fencing, or the fencing node did not): token may
// still hold a quorum; the hook's error; an error wrapping
// coordination.ErrClosed after Shutdown; ctx's error when it ends first.
// When a quorum (and the fencing node) answered, token holds no quorum any
// more: nodes that failed keep it until its TTL, without error, unless a
// node's key holds a value that is not an owner token: then an error
// naming the node (its index in the nodes given to [New]) wraps
// coordination.ErrBadState, and that key is left as it was. It is safe
// for concurrent use.
func (g *Group) ForceRelease(ctx context.Context, key, token string) (bool, error) {
	keys, err := g.keysFor(hooks.RedlockForceRelease, key)
	if err != nil {
		return false, err
	}
	if err := check.Token(token, layout.IsToken); err != nil {
		return false, engine.OpError(hooks.RedlockForceRelease, keys[0], err)
	}
	ctx, op, err := engine.AdmitGroup(ctx, g.ids, hooks.RedlockForceRelease, "redlock", keys[0])
	if err != nil {
		return false, err
	}
	f := g.fanOut(ctx, "force release", allNodes(len(g.nodes)), func(ctx context.Context, n *node) result {
		var out decode.Outcome
		var err error
		if n.fencing {
			out, err = forceFencing.Run(ctx, n.e, keys[n.i].First(), token)
		} else {
			// The tombstone lives the lock's remaining TTL (lock_abandon
			// keeps the longer of it and this 1 ms).
			out, err = forceLock.Run(ctx, n.e, keys[n.i].First(), token, int64(1))
		}
		if err != nil {
			return result{state: failed, err: err}
		}
		return result{state: yes, out: out}
	}, func([]result, int) bool { return false })
	released := false
	for _, r := range f.rs {
		released = released || r.state == yes && r.out == decode.Released
	}
	fi := g.cfg.fencing
	switch {
	case f.canceled:
		return released, op.End(fmt.Errorf("redlock: force release: %w", context.Cause(ctx)))
	case count(f.rs, yes) < g.quorum || fi >= 0 && f.rs[fi].state != yes:
		return released, op.End(g.quorumError("force release", f.rs, count(f.rs, yes)))
	}
	for i, r := range f.rs {
		if r.state == failed && errors.Is(r.err, sentinel.ErrBadState) {
			// The node's key holds a value outside the lock's layout,
			// left as it was: not an answer about token, whatever the
			// quorum said.
			return released, op.End(fmt.Errorf("redlock: node %d: %w", i, r.err))
		}
	}
	return released, op.End(nil)
}
