package redlock

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/decode"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/fencingcore"
	"github.com/coordkit/coordination/internal/instrument"
	"github.com/coordkit/coordination/internal/lockcore"
	"github.com/coordkit/coordination/internal/sentinel"
	"github.com/coordkit/coordination/internal/timing"
)

// Defaults of the group's options.
const (
	// DefaultNodeTimeout bounds each node's part of a group operation.
	DefaultNodeTimeout = time.Second
	// DefaultDriftFactor is the clock-drift allowance as a fraction of the
	// TTL (2 ms are added to it).
	DefaultDriftFactor = 0.01
)

// FenceSuffix is appended to the lock's key to name the fencing counter on
// the fencing node (see [WithFencing]): the counter key of package
// fencing's layout, a field of the shared counter hash of its slot.
const FenceSuffix = ":fence"

// ErrNodeTimeout is the error of a node that gave no answer within the
// node timeout: it counts as failed. It is a network timeout for
// coordination.IsTransient and coordination.IsAmbiguous (the
// command may still run on the node). A node whose client was still
// failing to connect when the node timeout ended fails with the dial error
// instead (see [New]), which is not ambiguous.
var ErrNodeTimeout error = nodeTimeoutError{}

type nodeTimeoutError struct{}

// Error returns the error's message.
func (nodeTimeoutError) Error() string { return "redlock: node did not answer within the node timeout" }

// Timeout reports true: the error is a timeout (net.Error).
func (nodeTimeoutError) Timeout() bool { return true }

// Temporary reports true: trying again may succeed (net.Error).
func (nodeTimeoutError) Temporary() bool { return true }

// Option configures a [Group]; see [New].
type Option func(*config) error

type config struct {
	nodeTimeout time.Duration
	drift       float64
	fencing     int // node index; -1: none
	sameServer  bool
}

// WithNodeTimeout bounds each node's part of every group operation: a node
// that has not answered within d counts as failed for that operation
// (whatever go-redis' own timeouts are), so one slow or unreachable node
// delays an operation by at most d. The default is 1 s; d must be at least
// 1 ms, and should be small next to the TTLs used (the Redlock algorithm
// suggests 5-50 ms for a 10 s TTL on a local network).
func WithNodeTimeout(d time.Duration) Option {
	return check.AtLeast("nodeTimeout", d, time.Millisecond, func(c *config) { c.nodeTimeout = d })
}

// WithDriftFactor sets the clock-drift allowance subtracted from every
// validity: f times the TTL, plus 2 ms. The default is 0.01 (1%, the
// Redlock algorithm's figure). f must be in [0, 0.5).
func WithDriftFactor(f float64) Option {
	return func(c *config) error {
		if !(f >= 0 && f < 0.5) {
			return check.InvalidArgument("driftFactor", "must be in [0, 0.5), got %v", f)
		}
		c.drift = f
		return nil
	}
}

// WithFencing makes node (an index into the group's coordinators) the
// fencing node: there, the lock is a fencing-token lease (package fencing's
// layout: the lease hash at the key, a counter that never expires named
// key+[FenceSuffix], a field of the shared counter hash of the key's slot;
// both must share a Cluster slot, whatever the client,
// so the key (or the coordinator's prefix) needs a {hash tag}), and
// each acquisition draws its token from the counter in the same script.
// An acquisition then succeeds only when the fencing node is among the
// nodes that granted it, and [Lock.FencingToken] returns the token.
//
// What it gives: tokens strictly increase in the order the fencing node
// granted its lease, so a resource that refuses a token lower than the
// highest it has seen ([examples/fenced-sql]: UPDATE ... WHERE fence <=
// $token) refuses a holder that was paused past its validity after a
// successor wrote. What it does not give: the lock is unavailable while the
// fencing node is, and the tokens are only as monotonic as that one node's
// history: a failover that loses writes, a restore from an older snapshot
// or the eviction of the counter can hand out a token twice (the
// quorum does not protect the counter). Every group on a key must use the
// same fencing node: other nodes hold a plain string, the fencing node a
// hash.
//
// [examples/fenced-sql]: https://github.com/coordkit/coordination/tree/main/examples/fenced-sql
func WithFencing(node int) Option {
	return func(c *config) error {
		if node < 0 {
			return check.InvalidArgument("fencingNode", "must not be negative, got %d", node)
		}
		c.fencing = node
		return nil
	}
}

// Group is a Redlock over N independent Redis deployments, one
// coordinator each (N odd, at least 3). Its methods are safe for
// concurrent use; it never closes the clients. Once any of its
// coordinators is shut down (coordination.Coordinator.Shutdown), every
// operation of the group fails with an error wrapping
// coordination.ErrClosed, a blocked [Group.Acquire] returns such an
// error, and its locks end locally (keep-alives stop; nothing is
// released: the tokens end at their TTL).
type Group struct {
	nodes  []*node
	quorum int
	cfg    config
	first  *engine.Engine // the group's meter and wait loop
	ids    []*engine.Engine

	latAcquired, latContended, latFailed metric.MeasurementOption
}

type node struct {
	i       int
	e       *engine.Engine
	fencing bool
	acquire *engine.Script[decode.Grant]
	refresh *engine.Script[bool]
	verify  *engine.Script[bool]
	release *engine.Script[decode.Outcome]
	// abandon is the cleanup of an ambiguous acquisition on the node
	// (lockcore.Abandon: it leaves a tombstone a late request of it
	// cannot pass); nil on the fencing node, which is released.
	abandon *engine.Script[decode.Outcome]
}

// New returns a Redlock group over nodes: one coordinator per independent
// Redis deployment (standalone servers, or primaries without replicas
// between them), in a fixed order used for hook admission. It sends
// nothing to Redis.
//
// nodes must hold an odd number of at least 3 distinct coordinators over
// distinct clients: a nil coordinator, fewer than 3, an even count, the
// same coordinator or client twice, or two *redis.Client (or Cluster
// clients) with the same address are errors wrapping
// coordination.ErrInvalidArgument naming "nodes"; invalid options name
// their argument. Addresses are compared as written: New sends nothing,
// so two names of one server ("localhost:6379" and "127.0.0.1:6379", a
// DNS alias) are not told apart, and the group then has fewer independent
// nodes than it counts. Keeping the nodes distinct is the caller's part. Each coordinator's key prefix, hooks and logger apply on
// its node; the group's instruments are recorded through the first
// coordinator's meter provider.
//
// New adds one go-redis hook to each node's client (once per coordinator,
// however many groups use it) that records whether its dials connect; it
// wraps dials only, not commands, and changes nothing of them. With it, a
// node whose client is still failing to connect when the node timeout
// ends (a refused connection: go-redis' dial retries, 5 by default, and its
// command retries outlast the default node timeout) fails with that dial
// error, a *net.OpError, instead of [ErrNodeTimeout]: nothing was sent to
// it, so coordination.IsAmbiguous is false for it.
func New(nodes []*coordination.Coordinator, opts ...Option) (*Group, error) {
	cfg := config{nodeTimeout: DefaultNodeTimeout, drift: DefaultDriftFactor, fencing: -1}
	if err := check.Apply(&cfg, opts); err != nil {
		return nil, err
	}
	n := len(nodes)
	switch {
	case n < 3:
		return nil, check.InvalidArgument("nodes", "a Redlock needs at least 3 independent nodes, got %d", n)
	case n%2 == 0:
		return nil, check.InvalidArgument("nodes", "a Redlock needs an odd number of nodes, got %d", n)
	}
	if cfg.fencing >= n {
		return nil, check.InvalidArgument("fencingNode", "must be a node index below %d, got %d", n, cfg.fencing)
	}
	g := &Group{quorum: n/2 + 1, cfg: cfg}
	addrs := map[string]int{}
	for i, c := range nodes {
		if c == nil {
			return nil, check.InvalidArgument("nodes", "node %d is nil", i)
		}
		e, err := engine.Of(c)
		if err != nil {
			return nil, check.InvalidArgument("nodes", "node %d is not a usable coordinator", i)
		}
		for j, prev := range g.nodes {
			if prev.e == e {
				return nil, check.InvalidArgument("nodes", "node %d is node %d again", i, j)
			}
			if prev.e.Client() == e.Client() {
				return nil, check.InvalidArgument("nodes", "node %d uses the client of node %d", i, j)
			}
		}
		if !cfg.sameServer {
			for _, a := range addresses(e.Client()) {
				if j, dup := addrs[a]; dup {
					return nil, check.InvalidArgument("nodes", "node %d has the server address of node %d: the nodes must be independent deployments", i, j)
				}
				addrs[a] = i
			}
		}
		nd := &node{i: i, e: e, acquire: lockcore.Acquire, refresh: lockcore.RedlockRefresh, verify: lockcore.Verify, release: lockcore.Release,
			abandon: lockcore.Abandon}
		if i == cfg.fencing {
			nd.fencing = true
			nd.acquire, nd.refresh, nd.verify, nd.release = fencingcore.Acquire, fencingcore.Refresh, fencingcore.Verify, fencingcore.Release
			nd.abandon = fencingcore.Abandon
		}
		g.nodes = append(g.nodes, nd)
		g.ids = append(g.ids, e)
	}
	g.first = g.nodes[0].e
	for _, e := range g.ids {
		// A node still dialing when its node timeout ends is reported
		// with the dial error (see fanOut).
		e.WatchDials()
	}
	result := func(r string) metric.MeasurementOption { return instrument.Attrs(attribute.String("result", r)) }
	g.latAcquired, g.latContended, g.latFailed = result("acquired"), result("contended"), result("failed")
	return g, nil
}

// addresses returns the server addresses a client connects to, as far as
// they can be told ("network/addr"); none for a Sentinel-backed client or
// an unknown type.
func addresses(c redis.UniversalClient) []string {
	switch v := c.(type) {
	case *redis.Client:
		o := v.Options()
		if o.Addr == "FailoverClient" || o.Dialer != nil && o.Addr == "" {
			return nil
		}
		network := o.Network
		if network == "" {
			network = "tcp"
		}
		return []string{network + "/" + o.Addr}
	case *redis.ClusterClient:
		var out []string
		for _, a := range v.Options().Addrs {
			out = append(out, "tcp/"+a)
		}
		return out
	}
	return nil
}

// Size returns the number of nodes.
// A zero or nil Group has 0.
func (g *Group) Size() int {
	if g == nil {
		return 0
	}
	return len(g.nodes)
}

// Quorum returns the number of nodes a group operation needs: N/2 + 1.
// A zero or nil Group has 0.
func (g *Group) Quorum() int {
	if g == nil {
		return 0
	}
	return g.quorum
}

// drift is the clock-drift allowance for ttl: factor × ttl + 2 ms.
func (g *Group) drift(ttl time.Duration) time.Duration {
	return time.Duration(math.Ceil(g.cfg.drift*float64(ttl))) + 2*time.Millisecond
}

// check validates a key and a TTL (nothing admitted, nothing sent) and
// returns the TTL in ms and every node's keys. Its errors name REDLOCK
// ACQUIRE and the key (when the key is valid), as every error of the
// acquisition does.
func (g *Group) check(key string, ttl time.Duration) (int64, []engine.Keys, error) {
	keys, err := g.keysFor(hooks.RedlockAcquire, key)
	if err != nil {
		return 0, nil, err
	}
	ms, err := g.checkTTL(ttl)
	if err != nil {
		return 0, nil, engine.OpError(hooks.RedlockAcquire, g.first.Key(key), err)
	}
	return ms, keys, nil
}

// keysFor validates a key (nothing admitted, nothing sent) and returns
// every node's keys. Its errors name op and the key (when the key is
// valid).
func (g *Group) keysFor(op, key string) ([]engine.Keys, error) {
	bad := func(k engine.Keys, err error) ([]engine.Keys, error) {
		return nil, engine.OpError(op, k, err)
	}
	if g == nil || len(g.nodes) == 0 {
		return bad(engine.Keys{}, check.InvalidArgument("group", "has no nodes: a zero or nil Group is not usable; create one with redlock.New"))
	}
	if err := check.Key("key", key); err != nil {
		return bad(engine.Keys{}, err)
	}
	named := g.first.Key(key) // names the key in the errors below
	keys := make([]engine.Keys, len(g.nodes))
	for i, n := range g.nodes {
		if n.fencing {
			var err error
			if keys[i], err = fencingcore.Keys(n.e, nil, key, key+FenceSuffix); err != nil {
				return bad(named, check.InvalidArgument("key", "with a fencing node the key needs a {hash tag} (e.g. \"{invoice:42}\"), so that the lease and its counter (key+%q) share a Cluster slot", FenceSuffix))
			}
			continue
		}
		keys[i] = n.e.Key(key)
	}
	return keys, nil
}

// checkTTL validates a TTL and returns it in milliseconds.
func (g *Group) checkTTL(ttl time.Duration) (int64, error) {
	ms, err := check.Millis("ttl", ttl)
	if err != nil {
		return 0, err
	}
	if d := g.drift(ttl); ttl <= d {
		return 0, check.InvalidArgument("ttl", "must be longer than the clock-drift allowance (%v), got %v", d, ttl)
	}
	return ms, nil
}

// TryAcquire takes the lock at key on a quorum of the nodes for ttl, in one
// round, and returns at once: the Redlock algorithm. It sends the owner-token
// acquire script (one round trip) to every node in parallel, each bounded by
// the node timeout, with one random owner token. The lock is acquired when
// a quorum (N/2+1) granted it (with fencing, the fencing node among them)
// and validity = ttl - elapsed - drift is positive, elapsed being measured
// from before the first request to the quorum's answer and drift
// [WithDriftFactor] × ttl + 2 ms. It returns as soon as the outcome is
// known: a node slower than the quorum delays nothing, and a node that does
// not answer within the node timeout counts as failed.
//
// When the lock is not acquired, every node that may hold the token is
// released, owner-checked: the nodes that granted it before TryAcquire
// returns (bounded by the node timeout), a node whose answer was lost or
// late in the background, after its own answer (so that the release cannot
// overtake the acquisition).
//
// key is any non-empty bytes, without the coordinators' prefixes; ttl is
// rounded up to whole milliseconds and must exceed the drift allowance.
//
// Errors: an error matching coordination.ErrNotAcquired when the nodes
// answered but no quorum granted the lock (another owner holds it on too
// many nodes, or the validity was used up before the quorum answered);
// a *[QuorumError] when failed nodes (errors, [ErrNodeTimeout]) left no
// quorum; coordination.ErrInvalidArgument naming key or ttl for bad input
// (nothing admitted, nothing sent), the key also when the group has a
// fencing node and the key has no {hash tag} (see [WithFencing]);
// the hook's error when a hook rejects; ctx's error (its cause) when ctx
// ends before the round is decided, as a single node's command cut by its
// context returns, not coordination.ErrNotAcquired (nothing is sent when
// it had ended before the call). Admitted as REDLOCK ACQUIRE through every
// node's hooks, in the group's order.
func (g *Group) TryAcquire(ctx context.Context, key string, ttl time.Duration) (*Lock, error) {
	return g.acquire(ctx, key, ttl, false)
}

// Acquire is [Group.TryAcquire] that waits as long as ctx allows: after an
// unsuccessful round it subscribes to the key's release notifications on
// every node (a release on any node wakes it), then retries at once and
// after each wake-up, or after a jittered delay: the time until enough
// holders' TTLs (as the nodes reported them) run out when the nodes
// answered, a jittered exponential backoff after failures, re-checking at
// least every 5 s. Each round uses a fresh owner token. It is admitted
// once, as REDLOCK ACQUIRE, however long it waits. When ctx ends first it
// gives up as every blocking acquire does (see
// coordination.ErrNotAcquired): when the nodes answered its last round
// that ended (another owner holds the lock), an error matching both
// coordination.ErrNotAcquired and ctx's error (context.Cause); when failed
// nodes left that round without a quorum (an outage, not contention), an
// error matching ctx's error and the round's *[QuorumError] (errors.As),
// not ErrNotAcquired (`...: context deadline exceeded; the last attempt
// failed: redlock: acquire: 1 of 3 nodes confirmed, 2 needed; 2 failed:
// ...`); when no round ended, ctx's error, not ErrNotAcquired. It ends with
// the round's error when failed nodes can never make a quorum (terminal
// errors such as NOPERM or WRONGTYPE on too many nodes).
func (g *Group) Acquire(ctx context.Context, key string, ttl time.Duration) (*Lock, error) {
	return g.acquire(ctx, key, ttl, true)
}

func (g *Group) acquire(ctx context.Context, key string, ttl time.Duration, block bool) (*Lock, error) {
	ms, keys, err := g.check(key, ttl)
	if err != nil {
		return nil, err
	}
	ctx, op, err := engine.AdmitGroup(ctx, g.ids, hooks.RedlockAcquire, "redlock", keys[0])
	if err != nil {
		return nil, err
	}
	if !block {
		l, _, err := g.round(ctx, key, ttl, ms, keys)
		return l, op.End(err)
	}
	var (
		l      *Lock
		rounds int
	)
	w := newWatches()
	defer w.close()
	// A Shutdown of any node's coordinator wakes the wait (the first's
	// ends it by itself), and the next attempt returns its error.
	for _, e := range g.ids[1:] {
		stop, _ := e.OnShutdown(w.wakeUp)
		defer stop()
	}
	err = g.first.Wait(ctx, engine.WaitConfig{Wake: w.wake}, func(ctx context.Context) (engine.Attempt, error) {
		if err := engine.ClosedAny(g.ids); err != nil {
			return engine.Attempt{}, err
		}
		rounds++
		began := time.Now()
		got, retryIn, err := g.round(ctx, key, ttl, ms, keys)
		took := time.Since(began)
		if err == nil {
			l = got
			return engine.Attempt{Done: true}, nil
		}
		var (
			qe      *QuorumError
			se      *splitError
			granted int
			failed  error // an outage: failed nodes left no quorum
		)
		switch {
		case errors.As(err, &qe):
			if qe.hopeless(g) {
				return engine.Attempt{}, err
			}
			granted = qe.Confirmed
			failed = err
			retryIn = timing.Backoff(rounds, 50*time.Millisecond, time.Second)
		case errors.Is(err, sentinel.ErrNotAcquired):
			if ctx.Err() != nil {
				// The context ended after the nodes answered: the wait
				// gives up with contention's error (ErrNotAcquired and
				// the context's).
				return engine.Attempt{}, nil
			}
			if errors.As(err, &se) {
				granted = se.granted
			}
		default:
			// A cancellation (the context cut the round: the wait gives
			// up naming the last round that ended) or a terminal error.
			return engine.Attempt{}, err
		}
		if granted > 0 {
			// A split vote (or a partial one, with nodes down):
			// contenders that retry together split again. Retry after a
			// random delay, holding release notifications until then
			// (the Redlock algorithm's desynchronisation). The delay
			// spans up to twice this round's time: a partial round
			// waits the node timeout for a node that does not answer,
			// holding what it was granted meanwhile, so a shorter
			// delay lands in another contender's round again and
			// again.
			retryIn = timing.Backoff(rounds, 10*time.Millisecond, max(200*time.Millisecond, 2*took))
			w.quiet(retryIn)
		}
		if retryIn <= 0 {
			retryIn = timing.Backoff(rounds, 50*time.Millisecond, time.Second)
		}
		if !w.started {
			// Subscribe first, then try again: a release in between is
			// never missed. At once, unless the vote was split: then
			// after the desynchronising delay, which bounds the wait as
			// well.
			w.start(ctx, g, keys)
			if granted == 0 {
				return engine.Attempt{RetryIn: time.Nanosecond, Failed: failed}, nil
			}
		}
		// A round that failed nodes decided is an outage, not contention:
		// the wait loop gives up naming its *QuorumError.
		return engine.Attempt{RetryIn: retryIn, Failed: failed}, nil
	})
	if err != nil {
		return nil, op.End(err)
	}
	return l, op.End(nil)
}

// result is one node's answer in a round.
type result struct {
	state     state
	grant     decode.Grant
	ok        bool           // refresh: still held and extended
	out       decode.Outcome // release
	held      holding        // holder read
	err       error
	ambiguous bool // a failed call may have run on the node
	cut       bool // failed because the caller's context ended, not the node
}

type state int

const (
	pending state = iota
	yes           // granted, extended, released
	no            // a definite refusal
	failed
)

// round is one Redlock acquisition round with a fresh owner token. On
// failure it returns the time after which trying again may succeed (0:
// unknown).
func (g *Group) round(ctx context.Context, key string, ttl time.Duration, ms int64, keys []engine.Keys) (*Lock, time.Duration, error) {
	if ctx.Err() != nil {
		// Nothing sent: no node refused, none failed, nothing to release.
		return nil, 0, engine.Ended(ctx)
	}
	token, err := engine.NewToken()
	if err != nil {
		return nil, 0, err
	}
	f := g.cfg.fencing
	start := time.Now()
	r := g.fanOut(ctx, "acquire", allNodes(len(g.nodes)), func(ctx context.Context, n *node) result {
		gr, err := n.acquire.Run(ctx, n.e, keys[n.i], token, ms)
		switch {
		case err != nil:
			return result{state: failed, err: err}
		case gr.Acquired:
			return result{state: yes, grant: gr}
		default:
			return result{state: no, grant: gr}
		}
	}, func(rs []result, pend int) bool {
		y := count(rs, yes)
		if f >= 0 && (rs[f].state == no || rs[f].state == failed) {
			return true
		}
		return y+pend < g.quorum || y >= g.quorum && (f < 0 || rs[f].state == yes)
	})
	elapsed := time.Since(start)
	rs := r.rs
	granted := count(rs, yes) >= g.quorum && (f < 0 || rs[f].state == yes)
	validity := ttl - elapsed - g.drift(ttl)
	if granted && validity > 0 && !r.canceled {
		g.first.Histogram(redlockAcquireLatency).Record(context.Background(), elapsed.Seconds(), g.latAcquired)
		l := newLock(g, key, token, keys, ttl, start, validity)
		for i, c := range r.late {
			l.q.inflight[i] = c.done // a release there waits for the acquisition
		}
		if f >= 0 {
			l.fence, _ = strconv.ParseInt(rs[f].grant.Value, 10, 64) // checked by the decoder
		}
		return l, 0, nil
	}
	// Not acquired: release wherever the token may be. The nodes that
	// granted it are released now, in parallel (so that the caller's next
	// round does not find this round's token there); a node that failed
	// ambiguously, or is still running, is released in the background after
	// its own answer.
	var granters []int
	for i, res := range rs {
		if res.state == yes {
			granters = append(granters, i)
		}
	}
	if len(granters) > 0 && !r.canceled {
		rel := g.fanOut(ctx, "acquire", granters, func(ctx context.Context, n *node) result {
			if _, err := n.release.Run(ctx, n.e, keys[n.i].First(), token); err != nil {
				return result{state: failed, err: err}
			}
			return result{state: yes}
		}, func([]result, int) bool { return false })
		rel.after(func(n *node, res result) {
			if res.state == failed {
				g.cleanup(n, "acquire", ttl, keys[n.i], token, nil)
			}
		})
	}
	r.after(func(n *node, res result) {
		switch {
		case res.state == failed && res.ambiguous:
			// Its request may still reach the node after the cleanup:
			// the cleanup leaves a tombstone there (plain nodes).
			g.abandon(n, ttl, keys[n.i], token)
		case res.state == yes && (r.canceled || !slices.Contains(granters, n.i)):
			g.cleanup(n, "acquire", ttl, keys[n.i], token, nil)
		}
	})
	switch {
	case r.canceled:
		// ctx ended before the round was decided: the context's error, as
		// a single node's command cut by its context returns (a blocking
		// Acquire's wait gives up naming the last round that ended).
		g.first.Histogram(redlockAcquireLatency).Record(context.Background(), elapsed.Seconds(), g.latFailed)
		return nil, 0, engine.Ended(ctx)
	case !granted && count(rs, yes)+count(rs, failed)+count(rs, pending) >= g.quorum && (f < 0 || rs[f].state != no):
		// Failed nodes could have made the difference.
		g.first.Histogram(redlockAcquireLatency).Record(context.Background(), elapsed.Seconds(), g.latFailed)
		return nil, 0, g.quorumError("acquire", rs, count(rs, yes))
	}
	g.first.Histogram(redlockAcquireLatency).Record(context.Background(), elapsed.Seconds(), g.latContended)
	if granted {
		return nil, 0, fmt.Errorf("redlock: %w: a quorum granted the lock after %v, leaving no validity of the %v TTL",
			sentinel.ErrNotAcquired, elapsed.Round(time.Millisecond), ttl)
	}
	if f >= 0 && rs[f].state == no && count(rs, yes) >= g.quorum {
		return nil, retryAfter(rs, g.quorum), &splitError{granted: count(rs, yes), err: fmt.Errorf("redlock: %w: granted by %d of %d nodes, but the fencing node %d holds another lock",
			sentinel.ErrNotAcquired, count(rs, yes), len(g.nodes), f)}
	}
	return nil, retryAfter(rs, g.quorum), &splitError{granted: count(rs, yes), err: fmt.Errorf("redlock: %w: granted by %d of %d nodes, %d needed",
		sentinel.ErrNotAcquired, count(rs, yes), len(g.nodes), g.quorum)}
}

// splitError is a contended round's error; granted is how many nodes
// granted it (more than 0: a split vote between contenders).
type splitError struct {
	granted int
	err     error
}

// Error returns the error's message.
func (e *splitError) Error() string { return e.err.Error() }

// Unwrap returns the error this one wraps, for errors.Is and errors.As.
func (e *splitError) Unwrap() error { return e.err }

// retryAfter returns how long until enough refusing holders' keys expire
// for a quorum of free nodes (as the nodes reported their TTLs), plus a
// random extra to desynchronise contenders; 0 when unknown.
func retryAfter(rs []result, quorum int) time.Duration {
	free := 0
	var ttls []time.Duration
	for _, r := range rs {
		switch {
		case r.state == yes:
			free++ // ours, being released
		case r.state == no && r.grant.RetryIn > 0:
			ttls = append(ttls, r.grant.RetryIn)
		}
	}
	need := quorum - free
	if need < 1 || need > len(ttls) {
		return 0
	}
	for i := 1; i < len(ttls); i++ { // insertion sort: a handful of nodes
		for j := i; j > 0 && ttls[j] < ttls[j-1]; j-- {
			ttls[j], ttls[j-1] = ttls[j-1], ttls[j]
		}
	}
	return timing.Jitter(ttls[need-1])
}

func count(rs []result, s state) int {
	c := 0
	for _, r := range rs {
		if r.state == s {
			c++
		}
	}
	return c
}

func allNodes(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// cleanup releases token on node n in the background, owner-checked,
// retried on transient errors for at most limit (see engine.Cleanup); with
// a non-nil settled, each try first waits for it to close (an acquisition
// still running on the node).
func (g *Group) cleanup(n *node, stage string, limit time.Duration, k engine.Keys, token string, settled <-chan struct{}) {
	hk := k.First()
	n.e.Cleanup(stage, limit, func(ctx context.Context) error {
		if err := wait(ctx, settled); err != nil {
			return err
		}
		_, err := n.release.Run(ctx, n.e, hk, token)
		return err
	})
}

// abandon is cleanup for a node whose acquisition failed ambiguously:
// lockcore.Abandon (fencingcore.Abandon on the fencing node) releases
// token if it holds the key and leaves its tombstone (for
// engine.AbandonFor(ttl)), so that the request, still on its way and
// reaching the node later, takes nothing (on the fencing node: draws no
// fencing token); while another owner holds the node's key, it is tried
// again until the key is free (engine.Engine.Abandon).
func (g *Group) abandon(n *node, ttl time.Duration, k engine.Keys, token string) {
	if n.abandon == nil {
		g.cleanup(n, "acquire", ttl, k, token, nil)
		return
	}
	n.e.Abandon(n.abandon, k.First(), ttl, token)
}

// wait waits until settled is closed (at once for nil) or ctx ends.
func wait(ctx context.Context, settled <-chan struct{}) error {
	if settled == nil {
		return nil
	}
	select {
	case <-settled:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// QuorumError is the error of a group operation that no quorum of nodes
// confirmed because nodes failed: had the failed nodes answered yes, the
// operation might have succeeded. Errs holds each node's error, in the
// group's order (nil for a node that answered); Unwrap returns the non-nil
// ones, so coordination.IsTransient judges it by its nodes' errors (a
// [ErrNodeTimeout] or a network error is transient).
type QuorumError struct {
	Op        string  // "acquire", "refresh", "verify", "release", "adopt", "read" or "force release"
	Confirmed int     // nodes that granted, extended or confirmed
	Quorum    int     // nodes needed
	Errs      []error // per node; nil where the node answered
}

// Error reads "redlock: acquire: 2 of 5 nodes confirmed, 3 needed; 3 failed:
// <the first failure, described without addresses>"; when the nodes that
// confirmed are enough but the fencing node failed (WithFencing), "3
// needed (the fencing node among them)".
func (e *QuorumError) Error() string {
	var first error
	failed := 0
	for _, err := range e.Errs {
		if err != nil {
			failed++
			if first == nil {
				first = err
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "redlock: %s: %d of %d nodes confirmed, %d needed", e.Op, e.Confirmed, len(e.Errs), e.Quorum)
	if e.Confirmed >= e.Quorum {
		// Enough nodes, so the one that had to be among them (the fencing
		// node) was not.
		b.WriteString(" (the fencing node among them)")
	}
	fmt.Fprintf(&b, "; %d failed", failed)
	if first != nil {
		b.WriteString(": ")
		if errors.Is(first, ErrNodeTimeout) {
			b.WriteString(first.Error())
		} else {
			b.WriteString(engine.Describe(first))
		}
	}
	return b.String()
}

// Unwrap returns the failed nodes' errors.
func (e *QuorumError) Unwrap() []error {
	var out []error
	for _, err := range e.Errs {
		if err != nil {
			out = append(out, err)
		}
	}
	return out
}

// hopeless reports whether nodes that failed terminally (an error reply
// such as NOPERM or WRONGTYPE) leave too few nodes for a quorum, or hit the
// fencing node: waiting cannot help.
func (e *QuorumError) hopeless(g *Group) bool {
	terminal := 0
	for i, err := range e.Errs {
		if err != nil && engine.Classify(err) == engine.Terminal {
			terminal++
			if i == g.cfg.fencing {
				return true
			}
		}
	}
	return len(e.Errs)-terminal < e.Quorum
}

func (g *Group) quorumError(op string, rs []result, confirmed int) *QuorumError {
	qe := &QuorumError{Op: op, Confirmed: confirmed, Quorum: g.quorum, Errs: make([]error, len(g.nodes))}
	for i, r := range rs {
		if r.state == failed {
			qe.Errs[i] = r.err
		}
	}
	return qe
}
