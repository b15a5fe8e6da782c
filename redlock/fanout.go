package redlock

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/instrument"
)

// fanned is the outcome of one fan-out: each node's result (pending for a
// node still running at the decision, or not asked), and the way to act on
// the late answers.
type fanned struct {
	rs       []result
	canceled bool // ctx ended before the decision
	late     map[int]*call
	g        *Group
}

// call is one node's part of a fan-out, written by its goroutine before
// done is closed.
type call struct {
	done  chan struct{}
	since time.Time // before the call began, for engine.DialFailure
	res   result
}

// fanOut runs fn on the nodes idx in parallel and returns once decided
// reports that the outcome is known (it sees every result so far and the
// number of nodes still running), every node answered, the node timeout
// passed, or ctx ended. A node still running then counts as failed with
// ErrNodeTimeout (ambiguous: its command may still run), or, when its
// client has failed to dial since the call began and holds no connection,
// with that dial error (see [timedOut]); its real answer is handed to the
// function given to [fanned.after], once it comes. When ctx ends first
// (seen as ctx.Done, or as a node's call that ctx's end cut short: not a
// failure of that node) the fan-out is canceled: every node still running
// counts as cut, with ctx's cause. go-redis does not bound I/O by a
// context's deadline unless ContextTimeoutEnabled is set, so the node
// timeout is enforced here, not by go-redis.
func (g *Group) fanOut(ctx context.Context, op string, idx []int, fn func(context.Context, *node) result, decided func(rs []result, pending int) bool) *fanned {
	f := &fanned{rs: make([]result, len(g.nodes)), g: g}
	calls := make(map[int]*call, len(idx))
	answered := make(chan int, len(idx))
	for _, i := range idx {
		c := &call{done: make(chan struct{}), since: time.Now()}
		calls[i] = c
		n := g.nodes[i]
		go func() {
			nctx, cancel := context.WithTimeout(ctx, g.cfg.nodeTimeout)
			r := fn(nctx, n)
			cancel()
			if r.state == failed {
				ended := errors.Is(r.err, context.DeadlineExceeded) || errors.Is(r.err, context.Canceled)
				switch {
				case ended && ctx.Err() == nil:
					// The node timeout's context, not the caller's.
					r = timedOut(n, c.since)
				default:
					r.ambiguous = n.e.Ambiguous(r.err)
					r.cut = ended && ctx.Err() != nil
				}
			}
			c.res = r
			close(c.done)
			answered <- i
		}()
	}
	timer := time.NewTimer(g.cfg.nodeTimeout)
	defer timer.Stop()
	left := len(idx)
	// cut ends the fan-out because ctx ended: every node still running
	// counts as cut, its real answer handed to after.
	cut := func() {
		f.canceled = true
		for i := range calls {
			f.rs[i] = result{state: failed, err: context.Cause(ctx), ambiguous: true, cut: true}
		}
		left = 0
	}
	for left > 0 && !decided(f.rs, left) {
		select {
		case i := <-answered:
			r := calls[i].res
			if r.cut {
				// The caller's context ended this node's call: not the
				// node's failure, and no answer; the fan-out is cut, as
				// when ctx.Done is seen first.
				cut()
				continue
			}
			left--
			f.rs[i] = r
			delete(calls, i)
			if r.state == failed {
				g.nodeFailure(op, r.err)
			}
		case <-timer.C:
			for i, c := range calls {
				f.rs[i] = timedOut(g.nodes[i], c.since)
				g.nodeFailure(op, f.rs[i].err)
			}
			left = 0
		case <-ctx.Done():
			cut()
		}
	}
	// Answers that arrived while deciding are kept; the rest are late.
	for {
		select {
		case i := <-answered:
			if c, ok := calls[i]; ok && f.rs[i].state == pending && !c.res.cut {
				f.rs[i] = c.res
				delete(calls, i)
				if c.res.state == failed {
					g.nodeFailure(op, c.res.err)
				}
			}
			continue
		default:
		}
		break
	}
	f.late = calls
	return f
}

// timedOut is the result of a call on n, begun at since, that the node
// timeout ended: ErrNodeTimeout (ambiguous), unless n's client has been
// failing to dial since the call began and holds no connection
// (engine.Engine.DialFailure): the call is still dialing and sent nothing,
// so the node failed with the dial error, not ambiguous. go-redis returns
// only the context's error when the context ends while it dials (its dial
// retries, 5 attempts with a backoff by default, then its command retries,
// outlast a node timeout of a second), so the cause is read from the dials
// recorded for the node's client.
func timedOut(n *node, since time.Time) result {
	if err := n.e.DialFailure(since); err != nil {
		err = &dialError{err: err}
		return result{state: failed, err: err, ambiguous: n.e.Ambiguous(err)}
	}
	return result{state: failed, err: ErrNodeTimeout, ambiguous: true}
}

// dialError is the error of a node still failing to connect when the node
// timeout ended its call: nothing was sent to it.
type dialError struct{ err error }

// Error returns the error's message, naming the dial error.
func (e *dialError) Error() string {
	return "redlock: node not connected within the node timeout: " + e.err.Error()
}

// Unwrap returns the dial error (a *net.OpError).
func (e *dialError) Unwrap() error { return e.err }

// after calls fn with every node's final result: at once for the nodes that
// answered (or were not asked: skipped), and in the background, when its
// answer comes, for each node still running at the decision.
func (f *fanned) after(fn func(n *node, r result)) {
	for i, r := range f.rs {
		if _, late := f.late[i]; late || r.state == pending {
			continue
		}
		fn(f.g.nodes[i], r)
	}
	for i, c := range f.late {
		n := f.g.nodes[i]
		go func() {
			<-c.done
			fn(n, c.res)
		}()
	}
}

var nodeFailureAttrs = func() map[[2]string]attribute.Set {
	m := map[[2]string]attribute.Set{}
	for _, op := range []string{"acquire", "refresh", "verify", "release", "adopt", "read", "force release"} {
		for _, reason := range []string{"timeout", "error"} {
			m[[2]string{op, reason}] = attribute.NewSet(attribute.String("operation", op), attribute.String("reason", reason))
		}
	}
	return m
}()

func (g *Group) nodeFailure(op string, err error) {
	reason := "error"
	if errors.Is(err, ErrNodeTimeout) {
		reason = "timeout"
	}
	set := nodeFailureAttrs[[2]string{op, reason}]
	g.first.Add(redlockNodeFailures, 1, instrument.Attrs(set.ToSlice()...))
}

// watches are the release-notification subscriptions of a blocking
// Acquire, one per node that answered the subscription, merged into one
// wake-up channel.
type watches struct {
	wake    chan struct{}
	ctx     context.Context // the subscriptions' life, ended by close
	cancel  context.CancelFunc
	started bool // owned by the wait loop's goroutine
	mu      sync.Mutex
	closed  bool
	ws      []*engine.Watch

	quietMu sync.Mutex
	deaf    time.Time // notifications are held until this instant
}

// quiet holds the notifications of the next d until d has passed, and
// drops a wake-up already pending: a release heard before the quiet period
// began (typically the other contender's release of its part of the same
// split vote, published while this round was releasing its own) must not
// end the desynchronising delay at once, or both contenders retry together
// and split again, round after round. Nothing is lost: the caller retries
// when the quiet period ends anyway (its RetryIn), and that attempt sees
// every release made before it.
func (w *watches) quiet(d time.Duration) {
	w.quietMu.Lock()
	defer w.quietMu.Unlock()
	w.deaf = time.Now().Add(d)
	select {
	case <-w.wake:
	default:
	}
}

// notify wakes the wait loop, once no quiet period holds notifications
// (re-checked after each hold, since a new quiet period may have begun
// meanwhile); it returns false when the watches are closed first. The
// check and the wake-up are one step under quietMu, so that quiet either
// sees the wake-up pending (and drops it) or is seen by the check.
func (w *watches) notify() bool {
	for {
		w.quietMu.Lock()
		d := time.Until(w.deaf)
		if d <= 0 {
			select {
			case w.wake <- struct{}{}:
			default:
			}
			w.quietMu.Unlock()
			return true
		}
		w.quietMu.Unlock()
		t := time.NewTimer(d)
		select {
		case <-w.ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
	}
}

// wakeUp wakes the wait loop at once, whatever quiet period holds
// notifications (a node's coordinator was shut down).
func (w *watches) wakeUp() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func newWatches() *watches {
	ctx, cancel := context.WithCancel(context.Background())
	return &watches{wake: make(chan struct{}, 1), ctx: ctx, cancel: cancel}
}

// start subscribes to the key's release channel on every node, in
// parallel, and returns once a quorum of them is confirmed (a holder's
// release publishes on each of its nodes, at least a quorum, so a quorum
// of subscriptions hears it), every node answered, or the node timeout
// passed, or ctx (the waiting caller's) ended. Subscriptions confirmed
// later still count; failed ones are ignored (the waiter then relies on
// its retry delays and re-checks).
func (w *watches) start(ctx context.Context, g *Group, keys []engine.Keys) {
	w.started = true
	answered := make(chan bool, len(g.nodes))
	for i, n := range g.nodes {
		go func() {
			ctx, cancel := context.WithTimeout(w.ctx, g.cfg.nodeTimeout)
			sub, err := n.e.Watch(ctx, keys[i].Full()[0])
			cancel()
			answered <- err == nil
			if err != nil {
				return
			}
			w.mu.Lock()
			if w.closed {
				w.mu.Unlock()
				sub.Close()
				return
			}
			w.ws = append(w.ws, sub)
			w.mu.Unlock()
			for {
				select {
				case <-w.ctx.Done():
					return
				case <-sub.C():
					// During a quiet period the notification is held
					// until it ends.
					if !w.notify() {
						return
					}
				}
			}
		}()
	}
	t := time.NewTimer(g.cfg.nodeTimeout)
	defer t.Stop()
	for ok, left := 0, len(g.nodes); ok < g.quorum && left > 0; left-- {
		select {
		case a := <-answered:
			if a {
				ok++
			}
		case <-t.C:
			return
		case <-ctx.Done():
			return // the wait gives up at once
		}
	}
}

// close ends every subscription. It does not wait for a subscription
// still being set up on an unresponsive node (go-redis' timeouts end it,
// and it is closed then).
func (w *watches) close() {
	w.mu.Lock()
	w.closed = true
	ws := w.ws
	w.ws = nil
	w.mu.Unlock()
	w.cancel()
	for _, sub := range ws {
		sub.Close()
	}
}
