package redlock

import (
	"context"
	"fmt"
	"sync"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/engine"
)

type lockState int

const (
	held lockState = iota
	released
	lost
)

// Lock is a Redlock held on a quorum of a [Group]'s nodes, returned by
// [Group.TryAcquire] and [Group.Acquire]. Its methods are safe for
// concurrent use; on a nil *Lock they report a lock that is not held.
//
// Its validity is local time: it ends at the instant the acquisition (or
// the last successful refresh) started plus the TTL minus the drift
// allowance. Past it the lock is over without any Redis call: Remaining
// returns 0, Context is cancelled, Refresh returns false.
type Lock struct {
	g     *Group
	key   string
	token string
	fence int64
	keys  []engine.Keys // per node, in the group's order
	// inflight are the nodes whose acquisition was still running when the
	// quorum decided: a release there waits for it to end, so that it
	// cannot overtake the acquisition (set at creation, then read only).
	inflight map[int]<-chan struct{}

	refreshMu sync.Mutex // serialises refreshes

	mu       sync.Mutex
	ttl      time.Duration // of the last successful acquire or refresh
	maxTTL   time.Duration // the longest TTL ever sent: how long a token may live
	validity time.Duration
	deadline time.Time
	state    lockState
	cause    error
	removed  bool // the best-effort removal after a loss has started
	ctx      context.Context
	cancel   context.CancelCauseFunc
	timer    *time.Timer
	keep     chan struct{}
	// outcomes are the nodes' answers to the release: 0 for a node that
	// has not confirmed yet.
	outcomes []engine.Outcome
	settled  bool     // a Release returned an outcome: later ones are AlreadyReleased
	unregs   []func() // unregister shutdownEnd from the nodes' coordinators
}

func newLock(g *Group, key, token string, keys []engine.Keys, ttl time.Duration, start time.Time, validity time.Duration) *Lock {
	return &Lock{
		g: g, key: key, token: token, keys: keys,
		ttl: ttl, maxTTL: ttl, validity: validity, deadline: start.Add(ttl - g.drift(ttl)),
		outcomes: make([]engine.Outcome, len(g.nodes)), inflight: map[int]<-chan struct{}{},
	}
}

// Key returns the lock's key as given (without the coordinators' prefixes).
func (l *Lock) Key() string {
	if l == nil {
		return ""
	}
	return l.key
}

// Token returns the owner token stored on the nodes: 36 characters, random
// (UUID v4). It identifies this holder; it is not a fencing token.
func (l *Lock) Token() string {
	if l == nil {
		return ""
	}
	return l.token
}

// FencingToken returns the token drawn from the fencing node's counter
// (see [WithFencing]): positive, and higher than every earlier holder's
// while that node keeps its data; 0 when the group has no fencing node.
func (l *Lock) FencingToken() int64 {
	if l == nil {
		return 0
	}
	return l.fence
}

// Validity returns the validity computed by the last successful acquisition
// or refresh: the TTL minus the time the quorum took to answer minus the
// drift allowance. It is a fixed figure; [Lock.Remaining] is what is left
// of it now.
func (l *Lock) Validity() time.Duration {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.validity
}

// TTL returns the TTL of the last successful acquisition or refresh.
func (l *Lock) TTL() time.Duration {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ttl
}

// Remaining returns the time left of the validity, measured on the local
// clock: 0 once the lock is released, lost, or its validity has ended.
// Protected work must finish within it.
func (l *Lock) Remaining() time.Duration {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	st, dl := l.state, l.deadline
	l.mu.Unlock()
	if st != held {
		return 0
	}
	if engine.ClosedAny(l.g.ids) != nil {
		l.shutdownEnd()
		return 0
	}
	if left := time.Until(dl); left > 0 {
		return left
	}
	l.checkExpiry()
	return 0
}

// Context returns a context cancelled when the lock is released (cause
// coordination.ErrReleased), lost or its validity ends (a cause matching
// coordination.ErrLost), or a node's coordinator is shut down (a cause
// matching coordination.ErrLost and coordination.ErrClosed; the lock is
// not released, it ends at its TTL). Run protected work under it. It is created on the
// first call; a nil *Lock returns one already cancelled (cause
// coordination.ErrNotHeld).
// Its Deadline is the end of the lock's validity as known locally (it
// moves later with each successful refresh), so a database or HTTP client
// given the context bounds its own request by the lock.
func (l *Lock) Context() context.Context {
	if l == nil {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(engine.ErrNotHeld)
		return ctx
	}
	l.checkExpiry()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ctx == nil {
		ctx, cancel := engine.LeaseContext(l.localDeadline)
		l.ctx = ctx
		if l.state == held && !l.registerLocked() {
			l.endLocked(lost, engine.ErrLeaseShutdown)
		}
		if l.state != held {
			cancel(l.cause)
		} else {
			l.cancel = cancel
			l.timer = time.AfterFunc(time.Until(l.deadline), l.checkExpiry)
		}
	}
	return l.ctx
}

// localDeadline returns the end of the lock's validity.
func (l *Lock) localDeadline() (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline, true
}

// Done returns Context().Done().
func (l *Lock) Done() <-chan struct{} { return l.Context().Done() }

// checkExpiry ends the lock when its validity has passed, and removes the
// token from every node, best effort.
func (l *Lock) checkExpiry() {
	l.mu.Lock()
	if l.state != held || time.Now().Before(l.deadline) {
		l.mu.Unlock()
		return
	}
	cancel := l.endLocked(lost, &engine.LostError{Reason: "the Redlock validity ended without a successful refresh"})
	l.mu.Unlock()
	if cancel != nil {
		cancel(l.causeOf())
	}
	l.removeEverywhere(nil)
}

// endLocked moves a held lock to st with cause and returns the context's
// cancel function (nil when no context exists yet); l.mu must be held.
func (l *Lock) endLocked(st lockState, cause error) context.CancelCauseFunc {
	l.state, l.cause = st, cause
	if l.timer != nil {
		l.timer.Stop()
	}
	if l.keep != nil {
		close(l.keep)
		l.keep = nil
	}
	for _, u := range l.unregs {
		u()
	}
	l.unregs = nil
	c := l.cancel
	l.cancel = nil
	return c
}

// registerLocked registers the lock to be ended by the Shutdown of each
// node's coordinator (once, when its context or keep-alive starts), and
// reports false when one of them has been shut down; l.mu must be held.
func (l *Lock) registerLocked() bool {
	if l.unregs != nil {
		return true
	}
	for _, e := range l.g.ids {
		u, ok := e.OnShutdown(l.shutdownEnd)
		l.unregs = append(l.unregs, u)
		if !ok {
			return false
		}
	}
	return true
}

// shutdownEnd ends a held lock locally because a node's coordinator was
// shut down: the keep-alive stops, the context is cancelled with
// engine.ErrLeaseShutdown, nothing is sent (the token ends at its TTL).
func (l *Lock) shutdownEnd() { l.lose(engine.ErrLeaseShutdown) }

func (l *Lock) causeOf() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cause
}

// lose ends a held lock with cause; it reports false when it was no longer
// held.
func (l *Lock) lose(cause error) bool {
	l.mu.Lock()
	if l.state != held {
		l.mu.Unlock()
		return false
	}
	cancel := l.endLocked(lost, cause)
	l.mu.Unlock()
	if cancel != nil {
		cancel(cause)
	}
	return true
}

// removeEverywhere releases the token on every node in the background,
// owner-checked, once per lock: after a loss, the token may still be on
// nodes that extended it. With f, each node is released after its answer
// in that fan-out (a node that answered that it no longer holds the token
// is skipped).
func (l *Lock) removeEverywhere(f *fanned) {
	l.mu.Lock()
	if l.removed {
		l.mu.Unlock()
		return
	}
	l.removed = true
	limit := l.maxTTL
	l.mu.Unlock()
	if f == nil {
		for _, n := range l.g.nodes {
			l.g.cleanup(n, "refresh", limit, l.keys[n.i], l.token, l.inflight[n.i])
		}
		return
	}
	f.after(func(n *node, r result) {
		if r.state != no {
			l.g.cleanup(n, "refresh", limit, l.keys[n.i], l.token, l.inflight[n.i])
		}
	})
}

// Refresh resets the lock's TTL to ttl on the nodes, owner-checked, in one
// round (the refresh script on every node in parallel, each bounded by the
// node timeout; admitted as REDLOCK RENEW). It returns true when a quorum
// (with fencing, the fencing node among them) extended it and the new
// validity, ttl minus the round's time minus the drift allowance, is
// positive; the lock's validity then restarts from before the round.
//
// Otherwise the lock is over: it is marked lost (its context is cancelled),
// its token is removed from every node in the background, best effort, and
// Refresh returns false, with a *[QuorumError] when failed nodes left no
// quorum, or an error matching ctx's when ctx ended first. Acquire again to
// go on. After the lock's validity has ended, or once it is released or
// lost, Refresh returns false without a round (after validity, removing the
// token best effort). An expired owner's Refresh never extends its
// successor's lock: each node checks the owner token.
//
// Errors: coordination.ErrInvalidArgument for ttl below 1 ms or not above
// the drift allowance (nothing sent); the hook's error when a hook rejects
// (the lock is untouched).
func (l *Lock) Refresh(ctx context.Context, ttl time.Duration) (bool, error) {
	if l == nil {
		return false, nil
	}
	ms, err := l.g.checkTTL(ttl)
	if err != nil {
		return false, err
	}
	ctx, op, err := engine.AdmitGroup(ctx, l.g.ids, hooks.RedlockRenew, "redlock")
	if err != nil {
		return false, err
	}
	l.refreshMu.Lock()
	defer l.refreshMu.Unlock()
	if l.Remaining() == 0 {
		return false, op.End(nil)
	}
	ok, err := l.refresh(ctx, ttl, ms)
	return ok, op.End(err)
}

// refresh runs one refresh round; l.refreshMu must be held.
func (l *Lock) refresh(ctx context.Context, ttl time.Duration, ms int64) (bool, error) {
	g := l.g
	fi := g.cfg.fencing
	l.mu.Lock()
	l.maxTTL = max(l.maxTTL, ttl)
	l.mu.Unlock()
	start := time.Now()
	f := g.fanOut(ctx, "refresh", allNodes(len(g.nodes)), func(ctx context.Context, n *node) result {
		ok, err := n.refresh.Run(ctx, n.e, l.keys[n.i].First(), l.token, ms)
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
	elapsed := time.Since(start)
	rs := f.rs
	validity := ttl - elapsed - g.drift(ttl)
	if count(rs, yes) >= g.quorum && (fi < 0 || rs[fi].state == yes) && validity > 0 && !f.canceled {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.state != held {
			return false, nil // released meanwhile
		}
		l.ttl, l.validity = ttl, validity
		l.deadline = start.Add(ttl - g.drift(ttl))
		if l.timer != nil {
			l.timer.Reset(time.Until(l.deadline))
		}
		return true, nil
	}
	var err error
	switch {
	case f.canceled:
		err = fmt.Errorf("redlock: refresh: %w", context.Cause(ctx))
	case count(rs, yes)+count(rs, failed)+count(rs, pending) >= g.quorum && (fi < 0 || rs[fi].state != no) && validity > 0:
		err = g.quorumError("refresh", rs, count(rs, yes))
	}
	l.lose(&engine.LostError{Reason: "no quorum of nodes confirmed the Redlock refresh", Err: err})
	if engine.ClosedAny(g.ids) == nil {
		// After a node's coordinator was shut down, nothing more is sent:
		// the token ends at its TTL.
		l.removeEverywhere(f)
	}
	return false, err
}

// Release removes the lock's token from every node, owner-checked (the
// release script on each node in parallel, each bounded by the node
// timeout; admitted as REDLOCK RELEASE). A node that answers, whatever it
// answers, no longer holds this token: it confirms the release. A node's
// release wakes the waiters of [Group.Acquire].
//
// Once a quorum of nodes has confirmed, Release returns, by what the nodes
// answered (each node's answer is the owner-token lock's: it deleted the
// token, found the key gone, or found another owner's token):
//
//   - coordination.Released when a quorum of nodes deleted this lock's
//     token now (a node whose request was re-sent after a lost reply
//     recognises its own release): the lock was held and is released;
//   - coordination.NotOwned when a quorum of nodes hold another owner's
//     token: the lock expired and was taken over (the token was removed
//     from the nodes that still had it; the other owner's are untouched);
//   - coordination.AlreadyReleased otherwise: the lock is gone from a
//     quorum and nobody holds it on a quorum (it expired, or its token was
//     removed after a loss, or by the background retries of an earlier
//     Release that returned an error); also on every Release after one
//     that returned an outcome, and on a nil *Lock, without asking Redis.
//
// When the first quorum of answers is mixed, Release waits for the other
// nodes (at most the node timeout) while their answers could still make
// a quorum of one kind. When the answers kept from an earlier Release
// (which returned an error; nodes that answered late, in the background,
// count too) decide the outcome, Release returns it without asking Redis.
//
// The lock counts as released from the moment Release is called: its
// context is cancelled (cause coordination.ErrReleased) and its keep-alive
// stops. A node whose release failed with a transient error or a timeout
// is retried in the background until it answers or the lock's TTL has
// passed. When no quorum confirmed, Release returns
// coordination.ReleaseUnknown with a *[QuorumError] (or an error matching ctx's when ctx ended first) and the
// lock keeps its token: call Release again to retry the nodes that have
// not confirmed (the answers of those that have are kept). With a fencing
// node ([WithFencing]), Release also waits (at most the node timeout) for
// the fencing node's answer, even once a quorum has confirmed: a token
// left there would refuse the next holder until the TTL.
//
// Errors: the hook's error when a hook rejects (nothing is changed; the
// outcome is 0).
func (l *Lock) Release(ctx context.Context) (coordination.ReleaseOutcome, error) {
	if l == nil {
		return coordination.AlreadyReleased, nil
	}
	ctx, op, err := engine.AdmitGroup(ctx, l.g.ids, hooks.RedlockRelease, "redlock")
	if err != nil {
		return 0, err
	}
	out, err := l.release(ctx)
	return coordination.ReleaseOutcome(out), op.End(err)
}

// tally counts the nodes' release answers by outcome.
type tally struct{ released, already, notOwned int }

func (t *tally) add(o engine.Outcome) {
	switch o {
	case engine.Released:
		t.released++
	case engine.AlreadyReleased:
		t.already++
	case engine.NotOwned:
		t.notOwned++
	}
}

func (t tally) confirmed() int { return t.released + t.already + t.notOwned }

// outcome returns the release's outcome once a quorum confirmed and no
// pending answer can change it: Released or NotOwned when a quorum answered
// so, AlreadyReleased when neither can reach a quorum with the pending
// nodes. ok is false while it is not decided.
func (t tally) outcome(quorum, pending int) (engine.Outcome, bool) {
	switch {
	case t.confirmed() < quorum:
		return 0, false
	case t.released >= quorum:
		return engine.Released, true
	case t.notOwned >= quorum:
		return engine.NotOwned, true
	case t.released+pending < quorum && t.notOwned+pending < quorum:
		return engine.AlreadyReleased, true
	}
	return 0, false
}

func (l *Lock) release(ctx context.Context) (engine.Outcome, error) {
	g := l.g
	l.checkExpiry()
	l.mu.Lock()
	if l.settled {
		l.mu.Unlock()
		return engine.AlreadyReleased, nil
	}
	var cancel context.CancelCauseFunc
	switch l.state {
	case held:
		cancel = l.endLocked(released, engine.ErrReleased)
	case lost:
		l.state = released // keep the loss as the cause
	}
	var idx []int
	var prev tally
	for i, o := range l.outcomes {
		if o != 0 {
			prev.add(o)
		} else {
			idx = append(idx, i)
		}
	}
	left := time.Until(l.deadline) + g.drift(l.ttl)
	fi := g.cfg.fencing
	if fi >= 0 && l.outcomes[fi] != 0 {
		fi = -1 // the fencing node has confirmed already: nothing to await there
	}
	// Decided by earlier answers alone (answers that came in the background
	// after an earlier Release returned an error): Redis is not asked again.
	out, decided := prev.outcome(g.quorum, len(idx))
	if decided {
		l.settled = true
	}
	l.mu.Unlock()
	if cancel != nil {
		cancel(engine.ErrReleased)
	}
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
		if err := wait(ctx, l.inflight[n.i]); err != nil {
			return result{state: failed, err: err}
		}
		out, err := n.release.Run(ctx, n.e, n.e.WithMark(l.keys[n.i].First()), l.token)
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
			l.mu.Lock()
			l.outcomes[n.i] = r.out
			l.mu.Unlock()
		case r.state == failed && engine.Classify(r.err) != engine.Terminal && left > 0:
			g.cleanup(n, "release", left, l.keys[n.i], l.token, l.inflight[n.i])
		}
	})
	t := sum(f.rs)
	if t.confirmed() >= g.quorum {
		// Nodes still running count as not answering: their answers
		// cannot change the outcome any more, or the node timeout passed.
		out, _ := t.outcome(g.quorum, 0)
		l.mu.Lock()
		l.settled = true
		l.mu.Unlock()
		return out, nil
	}
	if f.canceled {
		return 0, fmt.Errorf("redlock: release: %w", context.Cause(ctx))
	}
	return 0, g.quorumError("release", f.rs, t.confirmed())
}

// KeepAlive starts refreshing the lock in the background every TTL/3 (from
// the last successful refresh), with the last TTL, until it is released or
// lost. Renewals are not admitted through hooks. A renewal that no quorum
// confirms ends the lock, as [Lock.Refresh] does: its context is cancelled
// with a cause matching coordination.ErrLost and the token is removed from
// every node, best effort. KeepAlive returns at once; calling it again, or
// on a lock no longer held, does nothing.
func (l *Lock) KeepAlive() {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.state != held || l.keep != nil {
		return
	}
	if !l.registerLocked() {
		return // a node was shut down: Remaining and Context end the lock
	}
	// Each node's coordinator waits for the keep-alive in its Shutdown.
	tracked := make([]*engine.Engine, 0, len(l.g.ids))
	for _, e := range l.g.ids {
		if !e.Track() {
			for _, t := range tracked {
				t.Untrack()
			}
			return
		}
		tracked = append(tracked, e)
	}
	l.keep = make(chan struct{})
	go func(stop chan struct{}) {
		defer func() {
			for _, e := range tracked {
				e.Untrack()
			}
		}()
		l.keepAlive(stop)
	}(l.keep)
}

func (l *Lock) keepAlive(stop chan struct{}) {
	timer := time.NewTimer(l.TTL() / 3)
	defer timer.Stop()
	for {
		select {
		case <-stop:
			return
		case <-timer.C:
		}
		l.refreshMu.Lock()
		ttl := l.TTL()
		if l.Remaining() == 0 {
			l.refreshMu.Unlock()
			return
		}
		ms, _ := engine.Millis("ttl", ttl)
		sent := time.Now()
		ok, err := l.refresh(context.Background(), ttl, ms)
		l.refreshMu.Unlock()
		if !ok && engine.ClosedAny(l.g.ids) != nil {
			return // ended by a Shutdown, not lost
		}
		if !ok {
			l.mu.Lock()
			wasLost := l.state == lost
			l.mu.Unlock()
			if wasLost {
				l.g.first.Logger().Warn("redlock: a keep-alive renewal found no quorum; the lock is lost",
					"error", engine.Describe(err))
			}
			return
		}
		timer.Reset(max(ttl/3-time.Since(sent), 0))
	}
}
