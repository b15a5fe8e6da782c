package redlock

import (
	"context"
	"fmt"
	"sync"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/decode"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/sentinel"
)

// kind names a Redlock's operations for the hooks; its lease has no
// instruments of its own (the group records acquire_latency and
// node_failures).
var kind = &engine.LeaseKind{
	Primitive: "redlock",
	RenewOp:   hooks.RedlockRenew, VerifyOp: hooks.RedlockVerify, ReleaseOp: hooks.RedlockRelease,
}

// Lock is a Redlock held on a quorum of a [Group]'s nodes, returned by
// [Group.TryAcquire] and [Group.Acquire]. It is a [coordination.Lease]
// whose server side is the quorum: its methods are safe for concurrent use
// and behave as documented there, with these differences. A nil *Lock is
// not a lock (the promoted methods need a value).
//
// Validity is local time: the lock ends at the instant the acquisition (or
// the last successful refresh) started plus the TTL minus the group's
// drift allowance ([WithDriftFactor]). Past it the lock is over without any
// Redis call: Remaining returns 0, Context is cancelled (a cause matching
// coordination.ErrLost) and the token is removed from every node, best
// effort. The Shutdown of any node's coordinator ends the lock locally
// (its context's cause matches coordination.ErrLost and
// coordination.ErrClosed; nothing is sent, the token ends at its TTL).
//
// Refresh resets the TTL on every node in parallel (each bounded by the
// node timeout; admitted as REDLOCK RENEW), and takes the lock again on a
// node where its key is free (the node restarted without its data, or the
// key expired there), never on a node another owner holds: so the lock
// heals back onto every node after each restart instead of living on a
// shrinking majority (redsync's WithSetNXOnExtend, here always on). The
// fencing node ([WithFencing]) is only extended: a restart there loses
// its counter, and the lock with it. A refresh request that reaches a node
// after this lock's release there (delayed on the network past its node
// timeout) can take that node's key again until its TTL: one node, which
// delays nobody while a quorum of the others is free. It returns true when a quorum
// (with fencing, the fencing node among them) extended it and the new
// validity, ttl minus the round's time minus the drift allowance, is
// positive; the validity then restarts from before the round. Otherwise
// the lock is over: it is marked lost, its token is removed from every
// node in the background, best effort, and Refresh returns false, with a
// *[QuorumError] when failed nodes left no quorum, or an error matching
// ctx's when ctx ended first. A ttl below 1 ms or not above the drift
// allowance is an error wrapping coordination.ErrInvalidArgument, with
// nothing sent. KeepAlive renews every TTL/3 the same way; a renewal that
// no quorum confirms ends the lock.
//
// Verify asks every node (admitted as REDLOCK VERIFY): true when a quorum
// (with fencing, the fencing node among them) hold the token; false, and
// the lock lost, when they cannot; a *[QuorumError] when failed nodes left
// it undecided (the lock is unchanged).
//
// Release removes the token from every node in parallel, owner-checked
// (admitted as REDLOCK RELEASE). A node that answers, whatever it answers,
// no longer holds this token: it confirms the release, and wakes the
// waiters of [Group.Acquire]. Once a quorum of nodes has confirmed,
// Release returns, by what they answered:
//
//   - coordination.Released when a quorum of nodes deleted this lock's
//     token now (a node whose request was re-sent after a lost reply
//     recognises its own release);
//   - coordination.NotOwned when a quorum of nodes hold another owner's
//     token: the lock expired and was taken over (the other owner's tokens
//     are untouched);
//   - coordination.AlreadyReleased otherwise: the lock is gone from a
//     quorum and nobody holds it on a quorum; also on every Release after
//     one that returned an outcome, without asking Redis.
//
// When the first quorum of answers is mixed, Release waits for the other
// nodes (at most the node timeout) while their answers could still make a
// quorum of one kind. A node whose release failed with a transient error
// or a timeout is retried in the background until it answers or the
// lock's TTL has passed. When no quorum confirmed, Release returns
// coordination.ReleaseUnknown with a *[QuorumError] (or an error matching
// ctx's when ctx ended first): call Release again to ask the nodes that
// have not confirmed (the answers of those that have, including late ones
// from the background, are kept; when they decide the outcome Redis is not
// asked). With a fencing node ([WithFencing]), Release also waits (at most
// the node timeout) for the fencing node's answer: a token left there
// would refuse the next holder until the TTL.
//
// Key is the lock's key as given (without the coordinators' prefixes);
// Token is the owner token stored on the nodes, not a fencing token.
type Lock struct {
	coordination.Lease
	q     *quorum
	fence int64
}

// quorum is a Redlock's engine.Backend: each operation on every node of
// the group, decided by a quorum.
type quorum struct {
	g     *Group
	h     *engine.Handle
	token string
	keys  []engine.Keys // per node, in the group's order
	// inflight are the nodes whose acquisition was still running when the
	// quorum decided: a release there waits for it to end, so that it
	// cannot overtake the acquisition (set at creation, then read only).
	inflight map[int]<-chan struct{}

	mu       sync.Mutex
	maxTTL   time.Duration // the longest TTL ever sent: how long a token may live
	validity time.Duration
	removed  bool // the best-effort removal after a loss has started
	// outcomes are the nodes' answers to the release: 0 for a node that
	// has not confirmed yet.
	outcomes []decode.Outcome
	settled  bool // a Release returned an outcome: later ones are AlreadyReleased
}

func newLock(g *Group, key, token string, keys []engine.Keys, ttl time.Duration, start time.Time, validity time.Duration) *Lock {
	q := &quorum{
		g: g, token: token, keys: keys, maxTTL: ttl, validity: validity,
		outcomes: make([]decode.Outcome, len(g.nodes)), inflight: map[int]<-chan struct{}{},
	}
	q.h = engine.NewGroupHandle(g.ids, kind, q, keys[0], start, ttl)
	l := &Lock{q: q}
	engine.InitLease(&l.Lease, key, token, q.h)
	return l
}

// FencingToken returns the token drawn from the fencing node's counter
// (see [WithFencing]): positive, and higher than every earlier holder's
// while that node keeps its data; 0 when the group has no fencing node.
func (l *Lock) FencingToken() int64 { return l.fence }

// Validity returns the validity computed by the last successful acquisition
// or refresh: the TTL minus the time the quorum took to answer minus the
// drift allowance. It is a fixed figure; Remaining is what is left of it
// now.
func (l *Lock) Validity() time.Duration {
	l.q.mu.Lock()
	defer l.q.mu.Unlock()
	return l.q.validity
}

// TTL returns the TTL of the last successful acquisition or refresh.
func (l *Lock) TTL() time.Duration { return l.q.h.TTL() }

// CheckTTL accepts a ttl of at least 1 ms above the drift allowance.
func (q *quorum) CheckTTL(_ *engine.Handle, ttl time.Duration) (int64, error) {
	return q.g.checkTTL(ttl)
}

// Drift is the group's drift allowance.
func (q *quorum) Drift(ttl time.Duration) time.Duration { return q.g.drift(ttl) }

// Expired removes the token from every node, best effort.
func (q *quorum) Expired(*engine.Handle) { q.removeEverywhere(nil) }

// Settled reports whether a Release returned an outcome.
func (q *quorum) Settled() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.settled
}

// removeEverywhere releases the token on every node in the background,
// owner-checked, once per lock: after a loss, the token may still be on
// nodes that extended it. With f, each node is released after its answer
// in that fan-out (a node that answered that it no longer holds the token
// is skipped).
func (q *quorum) removeEverywhere(f *fanned) {
	q.mu.Lock()
	if q.removed {
		q.mu.Unlock()
		return
	}
	q.removed = true
	limit := q.maxTTL
	q.mu.Unlock()
	if f == nil {
		for _, n := range q.g.nodes {
			q.g.cleanup(n, "refresh", limit, q.keys[n.i], q.token, q.inflight[n.i])
		}
		return
	}
	f.after(func(n *node, r result) {
		if r.state != no {
			q.g.cleanup(n, "refresh", limit, q.keys[n.i], q.token, q.inflight[n.i])
		}
	})
}

// ask runs check on every node and returns the answers once a quorum
// (with fencing, the fencing node among them) said yes or no longer can;
// held is whether that quorum said yes.
func (q *quorum) ask(ctx context.Context, op string, check func(context.Context, *node) (bool, error)) (f *fanned, held bool) {
	g, fi := q.g, q.g.cfg.fencing
	f = g.fanOut(ctx, op, allNodes(len(g.nodes)), func(ctx context.Context, n *node) result {
		ok, err := check(ctx, n)
		switch {
		case err != nil:
			return result{state: failed, err: err}
		case ok:
			return result{state: yes, ok: true}
		default:
			return result{state: no}
		}
	}, func(rs []result, pend int) bool {
		y := count(rs, yes)
		if fi >= 0 && (rs[fi].state == no || rs[fi].state == failed) {
			return true
		}
		return y+pend < g.quorum || y >= g.quorum && (fi < 0 || rs[fi].state == yes)
	})
	return f, count(f.rs, yes) >= g.quorum && (fi < 0 || f.rs[fi].state == yes) && !f.canceled
}

// undecided returns the error of a round whose failed nodes (not definite
// refusals) left no quorum: a *QuorumError, or ctx's when it ended first;
// nil when a quorum refused.
func (q *quorum) undecided(ctx context.Context, op string, f *fanned) error {
	g, fi, rs := q.g, q.g.cfg.fencing, f.rs
	switch {
	case f.canceled:
		return fmt.Errorf("redlock: %s: %w", op, context.Cause(ctx))
	case count(rs, yes)+count(rs, failed)+count(rs, pending) >= g.quorum && (fi < 0 || rs[fi].state != no):
		return g.quorumError(op, rs, count(rs, yes))
	}
	return nil
}

// Refresh runs one refresh round; see [Lock].
func (q *quorum) Refresh(ctx context.Context, h *engine.Handle, ttl time.Duration, ms int64) (bool, error) {
	q.mu.Lock()
	q.maxTTL = max(q.maxTTL, ttl)
	q.mu.Unlock()
	start := time.Now()
	f, ok := q.ask(ctx, "refresh", func(ctx context.Context, n *node) (bool, error) {
		return n.refresh.Run(ctx, n.e, q.keys[n.i].First(), q.token, ms)
	})
	validity := ttl - time.Since(start) - q.g.drift(ttl)
	if ok && validity > 0 {
		q.mu.Lock()
		q.validity = validity
		q.mu.Unlock()
		return true, nil
	}
	var err error
	if validity > 0 {
		err = q.undecided(ctx, "refresh", f)
	} else if f.canceled {
		err = fmt.Errorf("redlock: refresh: %w", context.Cause(ctx))
	}
	h.Lose(&sentinel.LostError{Reason: "no quorum of nodes confirmed the Redlock refresh", Err: err})
	if engine.ClosedAny(q.g.ids) == nil {
		// After a node's coordinator was shut down, nothing more is sent:
		// the token ends at its TTL.
		q.removeEverywhere(f)
	}
	return false, err
}

// Verify runs one verify round; see [Lock].
func (q *quorum) Verify(ctx context.Context, _ *engine.Handle) (bool, error) {
	f, ok := q.ask(ctx, "verify", func(ctx context.Context, n *node) (bool, error) {
		return n.verify.Run(ctx, n.e, q.keys[n.i].First(), q.token)
	})
	if ok {
		return true, nil
	}
	if err := q.undecided(ctx, "verify", f); err != nil {
		return false, err
	}
	q.removeEverywhere(f)
	return false, nil
}

// tally counts the nodes' release answers by outcome.
type tally struct{ released, already, notOwned int }

func (t *tally) add(o decode.Outcome) {
	switch o {
	case decode.Released:
		t.released++
	case decode.AlreadyReleased:
		t.already++
	case decode.NotOwned:
		t.notOwned++
	}
}

func (t tally) confirmed() int { return t.released + t.already + t.notOwned }

// outcome returns the release's outcome once a quorum confirmed and no
// pending answer can change it: Released or NotOwned when a quorum answered
// so, AlreadyReleased when neither can reach a quorum with the pending
// nodes. ok is false while it is not decided.
func (t tally) outcome(quorum, pending int) (decode.Outcome, bool) {
	switch {
	case t.confirmed() < quorum:
		return 0, false
	case t.released >= quorum:
		return decode.Released, true
	case t.notOwned >= quorum:
		return decode.NotOwned, true
	case t.released+pending < quorum && t.notOwned+pending < quorum:
		return decode.AlreadyReleased, true
	}
	return 0, false
}

// Release runs one release round on the nodes that have not confirmed;
// see [Lock].
func (q *quorum) Release(ctx context.Context, h *engine.Handle, left time.Duration) (decode.Outcome, error) {
	g := q.g
	q.mu.Lock()
	if q.settled {
		q.mu.Unlock()
		return decode.AlreadyReleased, nil
	}
	var idx []int
	var prev tally
	for i, o := range q.outcomes {
		if o != 0 {
			prev.add(o)
		} else {
			idx = append(idx, i)
		}
	}
	fi := g.cfg.fencing
	if fi >= 0 && q.outcomes[fi] != 0 {
		fi = -1 // the fencing node has confirmed already: nothing to await there
	}
	// Decided by earlier answers alone (answers that came in the background
	// after an earlier Release returned an error): Redis is not asked again.
	out, decided := prev.outcome(g.quorum, len(idx))
	q.settled = decided
	q.mu.Unlock()
	if decided {
		return out, nil
	}
	sum := func(rs []result) tally {
		t := prev
		for _, r := range rs {
			if r.state == yes {
				t.add(r.out)
			}
		}
		return t
	}
	f := g.fanOut(ctx, "release", idx, func(ctx context.Context, n *node) result {
		if err := wait(ctx, q.inflight[n.i]); err != nil {
			return result{state: failed, err: err}
		}
		out, err := h.RunRelease(ctx, n.e, n.release, q.keys[n.i].First(), q.token)
		if err != nil {
			return result{state: failed, err: err}
		}
		return result{state: yes, out: out}
	}, func(rs []result, pend int) bool {
		// With a fencing node, its answer is awaited too: a token left
		// there would refuse every next holder until the TTL, whatever the
		// other nodes say.
		_, ok := sum(rs).outcome(g.quorum, pend)
		return ok && (fi < 0 || rs[fi].state != pending)
	})
	f.after(func(n *node, r result) {
		switch {
		case r.state == yes:
			q.mu.Lock()
			q.outcomes[n.i] = r.out
			q.mu.Unlock()
		case r.state == failed && engine.Classify(r.err) != engine.Terminal && left > 0:
			g.cleanup(n, "release", left, q.keys[n.i], q.token, q.inflight[n.i])
		}
	})
	t := sum(f.rs)
	if t.confirmed() >= g.quorum {
		// Nodes still running count as not answering: their answers
		// cannot change the outcome any more, or the node timeout passed.
		out, _ := t.outcome(g.quorum, 0)
		q.mu.Lock()
		q.settled = true
		q.mu.Unlock()
		return out, nil
	}
	if f.canceled {
		return 0, fmt.Errorf("redlock: release: %w", context.Cause(ctx))
	}
	return 0, g.quorumError("release", f.rs, t.confirmed())
}
