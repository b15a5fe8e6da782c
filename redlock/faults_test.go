package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/fencingcore"
	"github.com/coordkit/coordination/internal/lockcore"
	"github.com/coordkit/coordination/internal/testkit/faultproxy"
	"github.com/coordkit/coordination/redlock"
)

// cut partitions node i away: its proxy holds everything both ways.
func (c *cluster) cut(i int) { c.proxies[i].BlackHole(faultproxy.Both) }

// heal ends every fault on every node, discarding what the proxies held.
func (c *cluster) heal() {
	for _, p := range c.proxies {
		p.Clear()
		p.CutAll(faultproxy.RST)
		p.Restore()
	}
}

// The Redlock's behaviour under faults, on five dedicated real servers
// (flavors mixed) each behind its own fault proxy. Subtests run in order
// on the same servers, each on its own key, and heal the proxies after
// themselves.
func TestFaultsFiveServers(t *testing.T) {
	c := realNodes(t, 5)
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, c *cluster)
	}{
		{"QuorumOfReachableNodes", quorumOfReachable},
		{"SlowNodeCountsAsFailed", slowNodeFails},
		{"ValidityAccountsForElapsedTime", validityElapsed},
		{"RefreshAfterValidityRemovesToken", refreshAfterValidity},
		{"NoSecondOwnerWhileQuorumHolds", noSecondOwner},
		{"NonOwnerReleaseTouchesNothing", nonOwnerRelease},
		{"ReleaseOutcomes", releaseOutcomes},
		{"LostReplyOneToken", lostReplyOneToken},
		{"ReleaseWithoutQuorumKeepsToken", releaseWithoutQuorum},
		{"RefreshWithoutQuorumEndsLease", refreshWithoutQuorum},
		{"BlockingAcquireWakesOnRelease", blockingWakes},
		{"FencingTokens", fencingTokens},
		{"ReleaseAwaitsFencingNode", releaseAwaitsFencingNode},
		{"ReleaseDoesNotOvertakeSlowAcquire", releaseAfterSlowAcquire},
	} {
		c.t = t
		t.Run(tc.name, func(t *testing.T) {
			c.t = t
			defer c.heal()
			tc.fn(t, c)
		})
	}
}

// 3 of 5 nodes reachable: acquire succeeds (the reachable ones hold the
// token); 2 of 5: it fails with a QuorumError and leaves no token on any
// reachable node.
func quorumOfReachable(t *testing.T, c *cluster) {
	ctx := context.Background()
	g := c.group(redlock.WithNodeTimeout(200 * time.Millisecond))
	c.cut(3)
	c.proxies[4].Refuse(time.Hour)
	c.proxies[4].CutAll(faultproxy.RST)
	l, err := g.TryAcquire(ctx, "q3", 10*time.Second)
	if err != nil {
		t.Fatalf("3 of 5 reachable: %v", err)
	}
	waitFor(t, "the reachable nodes to hold the token", func() bool {
		h := c.holders("q3")
		return h[0] == l.Token() && h[1] == l.Token() && h[2] == l.Token()
	})
	if out, err := l.Release(ctx); out != coordination.Released || err != nil {
		t.Fatalf("release with 3 of 5 reachable: %v, %v; want released", out, err)
	}

	c.cut(2)
	start := time.Now()
	l, err = g.TryAcquire(ctx, "q2", 10*time.Second)
	elapsed := time.Since(start)
	var qe *redlock.QuorumError
	if l != nil || !errors.As(err, &qe) || errors.Is(err, coordination.ErrNotAcquired) {
		t.Fatalf("2 of 5 reachable: %v, %v; want a *QuorumError", l, err)
	}
	if qe.Op != "acquire" || qe.Confirmed != 2 || qe.Quorum != 3 || len(qe.Errs) != 5 || qe.Errs[0] != nil || qe.Errs[1] != nil ||
		!errors.Is(qe.Errs[2], redlock.ErrNodeTimeout) || !errors.Is(qe.Errs[3], redlock.ErrNodeTimeout) || qe.Errs[4] == nil {
		t.Fatalf("QuorumError %+v", qe)
	}
	if !coordination.IsAmbiguous(err) || !coordination.IsTransient(err) {
		t.Errorf("no quorum for want of nodes: ambiguous %v, class %v; want ambiguous and transient", coordination.IsAmbiguous(err), engine.Classify(err))
	}
	if elapsed > 200*time.Millisecond+time.Second { // not the clients' 3s read timeout
		t.Errorf("the failed acquisition took %v, want about the 200ms node timeout", elapsed)
	}
	// The two reachable nodes granted it; the failed attempt releases them.
	waitFor(t, "the reachable nodes to be free", func() bool {
		h := c.holders("q2")
		return h[0] == "" && h[1] == ""
	})
	t.Logf("2 of 5 reachable: failed after %v: %v", elapsed.Round(time.Millisecond), err)
}

// A node slower than the node timeout counts as failed: with three slow
// nodes no quorum answers in time and the acquisition ends at the node
// timeout, not at the sum (or the maximum) of the nodes' latencies; with two
// slow nodes the quorum of fast ones answers and nobody waits for them. The
// bounds are relative to the slow nodes' latency (2 s, below the clients'
// 3 s read timeout), far from the node timeout, so that a loaded machine
// does not blur them.
func slowNodeFails(t *testing.T, c *cluster) {
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	coords := c.coords()
	first, err := coordination.New(coords[0].Client(), coordination.WithKeyPrefix(c.prefix), coordination.WithMeterProvider(mp))
	if err != nil {
		t.Fatal(err)
	}
	coords[0] = first
	const latency = 2 * time.Second
	g, err := redlock.New(coords, redlock.WithNodeTimeout(nodeTimeout))
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{2, 3, 4} {
		c.proxies[i].Latency(faultproxy.ToClient, latency, 0)
	}
	start := time.Now()
	_, err = g.TryAcquire(ctx, "slow3", 10*time.Second)
	elapsed := time.Since(start)
	var qe *redlock.QuorumError
	if !errors.As(err, &qe) || !errors.Is(err, redlock.ErrNodeTimeout) {
		t.Fatalf("three nodes slower than the node timeout: %v, want a QuorumError of node timeouts", err)
	}
	if elapsed < nodeTimeout || elapsed >= nodeTimeout+(latency-nodeTimeout)/2 {
		t.Errorf("acquisition with three %v-slow nodes took %v, want the %v node timeout (sum of latencies %v)", latency, elapsed, nodeTimeout, 3*latency)
	}
	c.proxies[2].Latency(faultproxy.ToClient, 0, 0)
	start = time.Now()
	l, err := g.TryAcquire(ctx, "slow2", 10*time.Second)
	elapsed2 := time.Since(start)
	if err != nil {
		t.Fatalf("two slow nodes: %v", err)
	}
	if elapsed2 >= latency/2 {
		t.Errorf("acquisition with two %v-slow nodes took %v, want no wait for them", latency, elapsed2)
	}
	t.Logf("three nodes %v slow, node timeout %v: failed after %v; two slow: acquired after %v",
		latency, nodeTimeout, elapsed.Round(time.Millisecond), elapsed2.Round(time.Millisecond))
	if _, err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	timeouts := int64(0)
	results := map[string]uint64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch m.Name {
			case "coordination.redlock.node_failures":
				for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
					if v, _ := p.Attributes.Value("reason"); v.AsString() == "timeout" {
						timeouts += p.Value
					}
				}
			case "coordination.redlock.acquire_latency":
				for _, p := range m.Data.(metricdata.Histogram[float64]).DataPoints {
					v, _ := p.Attributes.Value("result")
					results[v.AsString()] += p.Count
				}
			}
		}
	}
	if timeouts < 3 {
		t.Errorf("node_failures{reason=timeout} = %d, want at least 3", timeouts)
	}
	if results["failed"] != 1 || results["acquired"] != 1 {
		t.Errorf("acquire_latency counts %v, want one failed and one acquired", results)
	}
}

// With 300 ms of latency on every reply and a 1 s TTL, the validity is at
// most 700 ms minus the drift allowance (12 ms).
func validityElapsed(t *testing.T, c *cluster) {
	ctx := context.Background()
	g := c.group()
	warm, err := g.TryAcquire(ctx, "validity-warm", time.Second) // connections open, scripts cached
	if err != nil {
		t.Fatal(err)
	}
	if _, err := warm.Release(ctx); err != nil {
		t.Fatal(err)
	}
	c.waitHolding("validity-warm", warm.Token(), 0)
	for _, p := range c.proxies {
		p.Latency(faultproxy.ToClient, 300*time.Millisecond, 0)
	}
	l, err := g.TryAcquire(ctx, "validity", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if v := l.Validity(); v <= 0 || v > 700*time.Millisecond-12*time.Millisecond {
		t.Fatalf("validity %v with 300ms latency and a 1s TTL, want in (0, 688ms]", v)
	}
	if r := l.Remaining(); r > l.Validity() {
		t.Fatalf("remaining %v above validity %v", r, l.Validity())
	}
	t.Logf("validity with 300ms latency, ttl 1s: %v", l.Validity())
	for _, p := range c.proxies {
		p.Latency(faultproxy.ToClient, 0, 0)
	}
	if _, err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// After the validity ended, Refresh returns false without a round and
// removes the token from every node, best effort (here the nodes' keys
// were made to outlive the validity, as on nodes whose clocks run slow).
func refreshAfterValidity(t *testing.T, c *cluster) {
	ctx := context.Background()
	g := c.group()
	l, err := g.TryAcquire(ctx, "expired", 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	c.waitHolding("expired", l.Token(), 5)
	for _, d := range c.direct {
		if err := d.PExpire(ctx, c.prefix+"expired", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(350 * time.Millisecond)
	before := c.proxies[0].Stats().Commands["EVALSHA"]
	ok, err := l.Refresh(ctx, time.Second)
	if ok || err != nil {
		t.Fatalf("Refresh after the validity = %v, %v; want false, nil", ok, err)
	}
	c.waitHolding("expired", l.Token(), 0)
	if got := context.Cause(l.Context()); !errors.Is(got, coordination.ErrLost) {
		t.Fatalf("context cause %v, want ErrLost", got)
	}
	if n := c.proxies[0].Stats().Commands["EVALSHA"] - before; n != 1 {
		t.Errorf("node 0 ran %d scripts after the validity, want the one owner-checked release", n)
	}
}

// While a quorum holds the first owner's token, a second group cannot
// acquire (and leaves nothing behind); with the token on fewer nodes it can.
func noSecondOwner(t *testing.T, c *cluster) {
	ctx := context.Background()
	a, b := c.group(), c.group()
	la, err := a.TryAcquire(ctx, "second", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	c.waitHolding("second", la.Token(), 5)
	for _, i := range []int{3, 4} { // the token stays on exactly a quorum
		if err := c.direct[i].Del(ctx, c.prefix+"second").Err(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.TryAcquire(ctx, "second", time.Minute); !errors.Is(err, coordination.ErrNotAcquired) {
		t.Fatalf("second group while a quorum holds the first token: %v, want ErrNotAcquired", err)
	}
	waitFor(t, "the second group's partial grants to be released", func() bool {
		h := c.holders("second")
		return h[3] == "" && h[4] == ""
	})
	if got := c.holding("second", la.Token()); got != 3 {
		t.Fatalf("the first owner's token is on %d nodes, want 3", got)
	}
	if err := c.direct[2].Del(ctx, c.prefix+"second").Err(); err != nil {
		t.Fatal(err)
	}
	lb, err := b.TryAcquire(ctx, "second", time.Minute)
	if err != nil {
		t.Fatalf("with the first token on 2 of 5 nodes: %v", err)
	}
	for _, l := range []*redlock.Lock{la, lb} {
		if _, err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// A holder whose lock expired releases: the nodes now hold the successor's
// token and keep it. The first TTL is 1 s, not shorter: a first round on
// cold connections of a loaded machine took 206 ms, leaving no validity
// of a 100 ms TTL.
func nonOwnerRelease(t *testing.T, c *cluster) {
	ctx := context.Background()
	a, b := c.group(), c.group()
	old, err := a.TryAcquire(ctx, "owner", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the first lock to expire on every node", func() bool {
		return slices.Equal(c.holders("owner"), make([]string, 5))
	})
	cur, err := b.TryAcquire(ctx, "owner", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	c.waitHolding("owner", cur.Token(), 5)
	// The successor holds the key on every node: not owned.
	if out, err := old.Release(ctx); out != coordination.NotOwned || err != nil {
		t.Fatalf("expired owner's Release = %v, %v; want not owned", out, err)
	}
	if ok, err := old.Refresh(ctx, time.Minute); ok || err != nil {
		t.Fatalf("expired owner's Refresh = %v, %v", ok, err)
	}
	time.Sleep(100 * time.Millisecond) // any late node call would have landed
	if got := c.holding("owner", cur.Token()); got != 5 {
		t.Fatalf("after the expired owner's release and refresh the successor holds %d nodes, want 5", got)
	}
	if out, err := cur.Release(ctx); out != coordination.Released || err != nil {
		t.Fatalf("successor release: %v, %v; want released", out, err)
	}
}

// A lost reply on one node (the proxy drops it, go-redis re-sends the
// script) gives one token on that node, not a refusal: with two nodes cut
// off, the quorum needs that node.
func lostReplyOneToken(t *testing.T, c *cluster) {
	ctx := context.Background()
	g := c.group(redlock.WithNodeTimeout(nodeTimeout))
	warm, err := g.TryAcquire(ctx, "lost-warm", time.Minute) // scripts cached on every node
	if err != nil {
		t.Fatal(err)
	}
	if _, err := warm.Release(ctx); err != nil {
		t.Fatal(err)
	}
	c.waitHolding("lost-warm", warm.Token(), 0)
	c.cut(3)
	c.cut(4)
	// Count the acquire script's calls on node 0 only (a rule ahead of the
	// fault that never fires): on a loaded machine the warm-up's release
	// may be re-tried there in the background, another EVALSHA.
	isAcquire := faultproxy.ScriptSHA(lockcore.Acquire.Hash())
	var sent atomic.Int32
	c.proxies[0].Apply(faultproxy.DelayCommand(func(cmd faultproxy.Command) bool {
		if isAcquire(cmd) {
			sent.Add(1)
		}
		return false
	}, time.Nanosecond, faultproxy.Forever))
	lost := c.proxies[0].Apply(faultproxy.DropReply(isAcquire, 1))
	l, err := g.TryAcquire(ctx, "lost", time.Minute)
	if err != nil {
		t.Fatalf("acquire with a lost reply on node 0 and two nodes cut off: %v", err)
	}
	// At least one re-send; on a loaded machine a re-send's own reply can
	// outlast the read timeout too and be re-sent again (each finds the
	// token the first send set).
	if lost.Fired() != 1 || sent.Load() < 2 {
		t.Fatalf("lost replies %d, acquire script sent %d times; want 1 and at least 2 (the re-send)", lost.Fired(), sent.Load())
	}
	t.Logf("acquire script sent %d times on node 0", sent.Load())
	h := c.holders("lost")
	if h[0] != l.Token() || h[1] != l.Token() || h[2] != l.Token() {
		t.Fatalf("holders %q, want the token on nodes 0-2", h)
	}
	if out, err := l.Release(ctx); out != coordination.Released || err != nil {
		t.Fatalf("release: %v, %v; want released", out, err)
	}
}

// A release that no quorum confirms returns false with a QuorumError and
// keeps the token: a later Release retries the nodes that did not confirm.
func releaseWithoutQuorum(t *testing.T, c *cluster) {
	ctx := context.Background()
	g := c.group(redlock.WithNodeTimeout(nodeTimeout))
	l, err := g.TryAcquire(ctx, "rel", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	c.waitHolding("rel", l.Token(), 5)
	c.cut(0)
	c.cut(1)
	c.cut(2)
	out, err := l.Release(ctx)
	var qe *redlock.QuorumError
	if out != 0 || !errors.As(err, &qe) || qe.Op != "release" || qe.Confirmed != 2 {
		t.Fatalf("release with 2 of 5 reachable: %v, %v; want no outcome and a QuorumError", out, err)
	}
	if !errors.Is(context.Cause(l.Context()), coordination.ErrReleased) || l.Remaining() != 0 {
		t.Fatal("the lock is not released locally")
	}
	c.heal()
	// Nodes 3 and 4 released the token; nodes 0-2 release it now, or
	// the background retries of the first Release did just before (then
	// they answer that it is gone): released, or already released by
	// this handle, never not owned.
	out, err = l.Release(ctx)
	if (out != coordination.Released && out != coordination.AlreadyReleased) || err != nil {
		t.Fatalf("second release after healing: %v, %v; want released or already released", out, err)
	}
	c.waitHolding("rel", l.Token(), 0)
}

// A refresh that no quorum confirms ends the lease (context cancelled,
// ErrLost) and removes the token best-effort once the nodes are back.
func refreshWithoutQuorum(t *testing.T, c *cluster) {
	ctx := context.Background()
	g := c.group(redlock.WithNodeTimeout(nodeTimeout))
	l, err := g.TryAcquire(ctx, "ref", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	c.waitHolding("ref", l.Token(), 5)
	lctx := l.Context()
	c.cut(0)
	c.cut(1)
	c.cut(2)
	ok, err := l.Refresh(ctx, time.Minute)
	var qe *redlock.QuorumError
	if ok || !errors.As(err, &qe) || qe.Op != "refresh" {
		t.Fatalf("refresh with 2 of 5 reachable: %v, %v; want false and a QuorumError", ok, err)
	}
	select {
	case <-lctx.Done():
	case <-time.After(time.Second):
		t.Fatal("the lock's context was not cancelled")
	}
	if !errors.Is(context.Cause(lctx), coordination.ErrLost) {
		t.Fatalf("cause %v, want ErrLost", context.Cause(lctx))
	}
	c.heal()
	c.waitHolding("ref", l.Token(), 0)
}

// A blocking Acquire wakes on the holder's release (a notification from
// any node), well before the holder's TTL.
func blockingWakes(t *testing.T, c *cluster) {
	ctx := context.Background()
	a, b := c.group(), c.group()
	la, err := a.TryAcquire(ctx, "wake", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	type res struct {
		l   *redlock.Lock
		err error
		at  time.Time
	}
	ch := make(chan res, 1)
	go func() {
		l, err := b.Acquire(ctx, "wake", time.Minute)
		ch <- res{l, err, time.Now()}
	}()
	time.Sleep(300 * time.Millisecond)
	released := time.Now()
	if _, err := la.Release(ctx); err != nil {
		t.Fatal(err)
	}
	var r res
	select {
	case r = <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter did not wake")
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	if d := r.at.Sub(released); d > time.Second {
		t.Errorf("the waiter held the lock %v after the release, want a notification wake-up", d)
	}
	t.Logf("handoff after release: %v", r.at.Sub(released).Round(time.Microsecond))
	if _, err := r.l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	ctx2, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	hold, err := a.TryAcquire(ctx, "wake", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Acquire(ctx2, "wake", time.Minute); !errors.Is(err, coordination.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire giving up: %v", err)
	}
	if _, err := hold.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// With a fencing node, each acquisition carries a token from its counter,
// increasing from holder to holder; the fencing node must be in the quorum.
func fencingTokens(t *testing.T, c *cluster) {
	ctx := context.Background()
	g := c.group(redlock.WithFencing(2), redlock.WithNodeTimeout(nodeTimeout))
	var last int64
	for i := range 3 {
		l, err := g.TryAcquire(ctx, "{fenced}", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if l.FencingToken() <= last {
			t.Fatalf("acquisition %d: token %d after %d", i, l.FencingToken(), last)
		}
		last = l.FencingToken()
		if v, err := c.direct[2].HGet(ctx, c.prefix+"{fenced}", "owner").Result(); err != nil || v != l.Token() {
			t.Fatalf("fencing node lease owner %q, %v", v, err)
		}
		if out, err := l.Release(ctx); out != coordination.Released || err != nil {
			t.Fatalf("release: %v, %v; want released", out, err)
		}
	}
	// The counter: a field of the shared counter hash of its slot (issue
	// 24), named after the counter key.
	fk := c.prefix + "{fenced}" + redlock.FenceSuffix
	if v, err := c.direct[2].HGet(ctx, fencingcore.SharedKeyOf(c.prefix, fk), fk).Int64(); err != nil || v != last {
		t.Fatalf("counter %d, %v; want %d", v, err, last)
	}
	// Four nodes reachable but not the fencing node: not acquired.
	c.cut(2)
	_, err := g.TryAcquire(ctx, "{fenced}", time.Minute)
	var qe *redlock.QuorumError
	if !errors.As(err, &qe) {
		t.Fatalf("without the fencing node: %v, want a QuorumError", err)
	}
	if !strings.Contains(err.Error(), "4 of 5 nodes confirmed, 3 needed (the fencing node among them); 1 failed") {
		t.Fatalf("without the fencing node: %q; want it to say the fencing node is needed", err)
	}
	defer func() { t.Logf("holders %q", c.holders("{fenced}")) }()
	waitFor(t, "the other nodes' grants to be released", func() bool {
		h := c.holders("{fenced}")
		return h[0] == "" && h[1] == "" && h[3] == "" && h[4] == ""
	})
}

// A release returns only once the fencing node has answered too, not as
// soon as a quorum of the others has: a token left on the fencing node
// refuses the next holder ("the fencing node holds another lock") until
// it is released. Here the fencing node's release is held 200 ms (below
// the node timeout) while the other four answer at once; the next
// acquisition right after Release must succeed.
func releaseAwaitsFencingNode(t *testing.T, c *cluster) {
	ctx := context.Background()
	g := c.group(redlock.WithFencing(2), redlock.WithNodeTimeout(nodeTimeout))
	for i := range 3 {
		l, err := g.TryAcquire(ctx, "{fenced-release}", time.Minute)
		if err != nil {
			t.Fatalf("acquisition %d: %v", i, err)
		}
		slow := c.proxies[2].Apply(faultproxy.DelayCommand(faultproxy.ScriptSHA(fencingcore.Release.Hash()), 200*time.Millisecond, 1))
		start := time.Now()
		if out, err := l.Release(ctx); out != coordination.Released || err != nil {
			t.Fatalf("release %d: %v, %v; want released", i, out, err)
		}
		took := time.Since(start)
		if slow.Fired() != 1 {
			t.Fatalf("release %d: the fencing node's release was not delayed (%d)", i, slow.Fired())
		}
		if took < 200*time.Millisecond {
			t.Errorf("release %d returned after %v, before the fencing node (held 200ms) answered", i, took)
		}
		if v, err := c.direct[2].Exists(ctx, c.prefix+"{fenced-release}").Result(); err != nil || v != 0 {
			t.Fatalf("release %d returned while the fencing node still holds the lease (%d, %v)", i, v, err)
		}
	}
}

// A release right after an acquisition that returned before a slow node
// answered waits for that node's acquisition, so that the release cannot
// overtake it and leave the token there until its TTL.
func releaseAfterSlowAcquire(t *testing.T, c *cluster) {
	ctx := context.Background()
	g := c.group()
	warm, err := g.TryAcquire(ctx, "overtake-warm", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := warm.Release(ctx); err != nil {
		t.Fatal(err)
	}
	c.waitHolding("overtake-warm", warm.Token(), 0)
	var l *redlock.Lock
	for try := 1; ; try++ {
		slow := c.proxies[4].Apply(faultproxy.DelayCommand(faultproxy.ScriptSHA(lockcore.Acquire.Hash()), 200*time.Millisecond, 1))
		l, err = g.TryAcquire(ctx, "overtake", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if out, err := l.Release(ctx); out != coordination.Released || err != nil {
			t.Fatalf("release: %v, %v; want released", out, err)
		}
		if slow.Fired() == 1 {
			break
		}
		// The fifth node's request had not left when the quorum answered
		// and the round ended (a loaded machine): nothing to overtake.
		// Again, the rule still armed.
		slow.Remove()
		c.waitHolding("overtake", l.Token(), 0)
		if try == 5 {
			t.Fatalf("in %d tries the fifth node's acquisition was never sent before the release", try)
		}
	}
	time.Sleep(400 * time.Millisecond) // the delayed acquisition has run
	c.waitHolding("overtake", l.Token(), 0)
}

// With one node of three cut off, every round that one of its nodes
// refuses waits the node timeout for the cut-off node while holding what
// it was granted. Three contenders taking turns must not livelock in split
// votes: each acquires, within a bound far below its wait limit. (The
// contenders once retried at once after a split, woken by each other's
// releases heard during the round, and split again for many seconds.)
func TestContendersWithOneNodeCutOff(t *testing.T) {
	c := miniNodes(t, 3)
	const timeout = 400 * time.Millisecond
	var groups []*redlock.Group
	for range 3 {
		groups = append(groups, c.group(redlock.WithNodeTimeout(timeout)))
	}
	c.cut(2)
	const key = "cutoff"
	for turn := range 3 {
		errs := make(chan error, len(groups))
		for i, g := range groups {
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				start := time.Now()
				l, err := g.Acquire(ctx, key, 2*time.Second)
				if err != nil {
					errs <- fmt.Errorf("turn %d contender %d: %w after %v", turn, i, err, time.Since(start).Round(time.Millisecond))
					return
				}
				took := time.Since(start)
				time.Sleep(20 * time.Millisecond)
				if _, err := l.Release(context.Background()); err != nil {
					errs <- fmt.Errorf("turn %d contender %d release: %w", turn, i, err)
					return
				}
				// Three contenders, each holding 20 ms: a few partial
				// rounds of the node timeout each at worst.
				if bound := 15 * timeout; took > bound {
					errs <- fmt.Errorf("turn %d contender %d acquired after %v, more than %v", turn, i, took.Round(time.Millisecond), bound)
					return
				}
				errs <- nil
			}()
		}
		for range groups {
			if err := <-errs; err != nil {
				t.Error(err)
			}
		}
	}
}
