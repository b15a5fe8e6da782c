package leader_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/leader"
)

const (
	faultLease = 300 * time.Millisecond
	faultRetry = 100 * time.Millisecond
	slack      = 200 * time.Millisecond
)

// A crashed leader (cut off from Redis: renewals stop, no release) is
// replaced within lease duration + retry delay + 200 ms, plus the time
// the test process was held up (a loaded machine delays the followers'
// retries as much).
func TestCrashedLeaderIsReplaced(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		j := newJournal()
		opts := []leader.Option{leader.WithLeaseDuration(faultLease), leader.WithRetryDelay(faultRetry)}
		crash := map[string]*failingHook{}
		for _, id := range []string{"a", "b", "c"} {
			h := &failingHook{err: errCutOff}
			crash[id] = h
			startContender(t, coordWith(t, b, []redis.Hook{h}), id, j, opts...)
		}
		j.next(t, 5*time.Second)
		var crashed []*termRec
		for range 2 {
			time.Sleep(faultLease / 3) // somewhere between two renewals
			// The leader now is the latest term: on a loaded machine a
			// lease can lapse between two renewals and be taken again
			// (by anyone) before the crash.
			cur := j.latest()
			stalls := testharness.MeterStalls(t)
			at := time.Now()
			crash[cur.id].on.Store(true)
			crashed = append(crashed, cur)
			next := j.successor(t, cur, 5*time.Second)
			stalls.Stop()
			took, bound := next.start.Sub(at), faultLease+faultRetry+slack+stalls.Total()
			if took > bound {
				t.Errorf("crashed leader %s replaced by %s after %v, want <= %v (%v of it stalls)", cur.id, next.id, took, bound, stalls.Total())
			}
			if next.token <= cur.token {
				t.Fatalf("successor %s token %d after %s token %d", next.id, next.token, cur.id, cur.token)
			}
			t.Logf("%s crashed; %s elected %v later (stalls %v)", cur.id, next.id, took, stalls.Total())
		}
		// The crashed leaders' own terms ended by their local deadlines.
		for _, r := range crashed {
			waitFor(t, 2*time.Second, "the crashed term's end", func() bool { return r.term.Context().Err() != nil })
			if !errors.Is(context.Cause(r.term.Context()), coordination.ErrLost) {
				t.Errorf("crashed term %d ended with %v, want ErrLost", r.token, context.Cause(r.term.Context()))
			}
		}
	}, testharness.RealOnly())
}

// A cancelled leader's lease is released and a follower is elected within
// retry delay + 200 ms; so is one whose OnElected returned (resignation).
func TestStoppedOrResignedLeaderIsReplacedQuickly(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		j := newJournal()
		opts := []leader.Option{leader.WithLeaseDuration(faultLease), leader.WithRetryDelay(faultRetry)}
		cs := map[string]*contender{}
		for _, id := range []string{"a", "b", "c"} {
			cs[id] = startContender(t, b.Coordinator(t), id, j, opts...)
		}
		prev := j.next(t, 5*time.Second)
		for i := range 4 {
			var at time.Time
			stalls := testharness.MeterStalls(t)
			if i%2 == 0 {
				at = time.Now()
				cs[prev.id].cancel()
			} else {
				at = time.Now()
				cs[prev.id].resign <- struct{}{}
			}
			next := j.next(t, 5*time.Second)
			stalls.Stop()
			took, bound := next.start.Sub(at), faultRetry+slack+stalls.Total()
			if took > bound {
				t.Errorf("round %d: %s replaced by %s after %v, want <= %v (%v of it stalls)", i, prev.id, next.id, took, bound, stalls.Total())
			}
			t.Logf("round %d (%s): %s replaced by %s after %v", i, map[bool]string{true: "cancel", false: "resign"}[i%2 == 0], prev.id, next.id, took)
			if i%2 == 0 {
				cs[prev.id] = startContender(t, b.Coordinator(t), prev.id, j, opts...)
			}
			prev = next
		}
	})
}

// When renewals fail because the server is gone, the term's context is
// cancelled no later than the local lease deadline and OnRevoked runs
// exactly once; the elector campaigns again when the server is back.
func TestRenewalFailureServerStopped(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		srv := testharness.StartStandalone(t, b.Flavor)
		o := srv.Options()
		o.MaxRetries = -1
		o.DialTimeout = 50 * time.Millisecond
		c, j, r := leadOn(t, o)
		srv.Stop()
		// The local deadline once the server is gone: a renewal in flight
		// when Stop was called may have been answered first and moved it
		// (read before the stop, it was up to a renewal period early).
		deadline := time.Now().Add(r.term.Remaining())
		revokedBy(t, r.term, deadline)
		if !errors.Is(context.Cause(r.term.Context()), coordination.ErrLost) {
			t.Errorf("cause %v, want ErrLost", context.Cause(r.term.Context()))
		}
		waitFor(t, 5*time.Second, "OnRevoked", func() bool { return j.snapshot()[0].revokes == 1 })
		if err := srv.Restart(); err != nil {
			t.Fatal(err)
		}
		r2 := j.next(t, 10*time.Second)
		// The restarted server lost the counter (no persistence): the token
		// starts again at 1, which is why fencing is only as durable as the
		// Redis history (see the package documentation).
		if r2.id != "a" || r2.token != 1 {
			t.Errorf("after restart: %s token %d, want a token 1 (counter lost with the data)", r2.id, r2.token)
		}
		must(0, c.stop(t))(t)
		for _, r := range j.snapshot() {
			if r.revokes != 1 {
				t.Errorf("term %d: OnRevoked ran %d times", r.token, r.revokes)
			}
		}
	}, testharness.RealOnly(), testharness.StandaloneOnly())
}

// leadOn starts one contender (lease 600 ms) on a client with options o,
// waits until it leads, and then for a third of the lease (between two
// renewals).
func leadOn(t *testing.T, o *redis.Options) (*contender, *journal, *termRec) {
	t.Helper()
	coord := must(coordination.New(redis.NewClient(o)))(t)
	t.Cleanup(func() {
		// A term's release that failed while the server was away is
		// retried in the background: Shutdown gives it its last try (the
		// server is back, or the test failed) before the client closes, so
		// that it does not outlive the test (the leak check of TestMain).
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = coord.Shutdown(ctx)
		cancel()
		_ = coord.Client().Close()
	})
	j := newJournal()
	const lease = 600 * time.Millisecond
	c := startContender(t, coord, "a", j, leader.WithLeaseDuration(lease), leader.WithRetryDelay(50*time.Millisecond))
	r := j.next(t, 5*time.Second)
	time.Sleep(lease / 3)
	return c, j, r
}

// revokedBy waits for term to end and checks that it ended no later than
// deadline (with 20 ms for scheduling).
func revokedBy(t *testing.T, term *leader.Term, deadline time.Time) {
	t.Helper()
	// The instant the term's context ends, and, as a reference, the
	// instant a timer set for the deadline fires: both run on a goroutine
	// of their own, so the scheduling delay of a loaded machine (which a
	// deadline timer inside the library suffers too) is measured, not
	// blamed on the library.
	ref := make(chan time.Time, 1)
	timer := time.AfterFunc(time.Until(deadline), func() { ref <- time.Now() })
	defer timer.Stop()
	done := make(chan time.Time, 1)
	stop := context.AfterFunc(term.Context(), func() { done <- time.Now() })
	defer stop()
	var at time.Time
	select {
	case at = <-done:
	case <-time.After(time.Until(deadline) + 2*time.Second):
		t.Fatal("term not revoked")
	}
	const bound = 20 * time.Millisecond
	late := at.Sub(deadline)
	if late <= bound {
		return
	}
	lag := (<-ref).Sub(deadline) // the deadline has passed: the timer fires
	if late > lag+bound {
		t.Errorf("term cancelled %v after its local deadline (a timer set for the deadline fired %v after it)", late, lag)
	}
}

// redirector dials a switchable address, can refuse new connections, and
// remembers its connections.
type redirector struct {
	addr    atomic.Value // string
	refuse  atomic.Bool
	dialled atomic.Int64
}

func (r *redirector) dial(ctx context.Context, network, _ string) (net.Conn, error) {
	if r.refuse.Load() {
		return nil, &net.OpError{Op: "dial", Net: network, Err: syscall.ECONNREFUSED}
	}
	r.dialled.Add(1)
	var d net.Dialer
	return d.DialContext(ctx, network, r.addr.Load().(string))
}

func clientKill(t *testing.T, admin *redis.Client, name string) int {
	t.Helper()
	list := must(admin.ClientList(context.Background()).Result())(t)
	n := 0
	for _, line := range strings.Split(list, "\n") {
		if !strings.Contains(line, " name="+name+" ") {
			continue
		}
		for _, f := range strings.Fields(line) {
			if id, ok := strings.CutPrefix(f, "id="); ok {
				if err := admin.Do(context.Background(), "CLIENT", "KILL", "ID", id).Err(); err == nil {
					n++
				}
			}
		}
	}
	return n
}

// When the leader's connections are killed with CLIENT KILL and it cannot
// reconnect, its term ends no later than the local deadline and OnRevoked
// runs once; once it can reconnect it is elected again.
func TestRenewalFailureClientKill(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		srv := testharness.StartStandalone(t, b.Flavor)
		admin := redis.NewClient(srv.Options())
		t.Cleanup(func() { _ = admin.Close() })
		rd := &redirector{}
		rd.addr.Store(srv.Addr)
		o := srv.Options()
		o.ClientName = "elector-under-test"
		o.Dialer = rd.dial
		c, j, r := leadOn(t, o)
		rd.refuse.Store(true)
		if n := clientKill(t, admin, "elector-under-test"); n == 0 {
			t.Fatal("CLIENT KILL found no connection of the elector")
		}
		// The local deadline once the connections are gone (a renewal
		// answered before the kill may have moved it).
		deadline := time.Now().Add(r.term.Remaining())
		revokedBy(t, r.term, deadline)
		waitFor(t, 5*time.Second, "OnRevoked", func() bool { return j.snapshot()[0].revokes == 1 })
		rd.refuse.Store(false)
		r2 := j.next(t, 5*time.Second)
		if r2.token != 2 {
			t.Errorf("re-elected with token %d, want 2", r2.token)
		}
		must(0, c.stop(t))(t)
		j.check(t)
	}, testharness.RealOnly(), testharness.StandaloneOnly())
}

// An elector pointed at a replica gets READONLY, which is transient: it is
// retried (and counted) until the replica is promoted with REPLICAOF NO ONE.
func TestReadOnlyReplicaIsRetriedUntilPromoted(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		_, replica := testharness.StartReplicaPair(t, b.Flavor)
		opt, reader := meter()
		c := redis.NewClient(replica.Options())
		t.Cleanup(func() { _ = c.Close() })
		coord := must(coordination.New(c, opt))(t)
		j := newJournal()
		startContender(t, coord, "a", j, leader.WithLeaseDuration(faultLease), leader.WithRetryDelay(20*time.Millisecond))
		waitFor(t, 5*time.Second, "READONLY failures", func() bool {
			return counterPoints(t, reader, "coordination.leader.acquire_failures")[""] >= 3
		})
		select {
		case r := <-j.elected:
			t.Fatalf("elected on a replica: %+v", r)
		default:
		}
		if err := c.Do(context.Background(), "REPLICAOF", "NO", "ONE").Err(); err != nil {
			t.Fatal(err)
		}
		r := j.next(t, 5*time.Second)
		if r.token != 1 {
			t.Errorf("token %d, want 1", r.token)
		}
	}, testharness.RealOnly(), testharness.StandaloneOnly())
}

// Through a primary failover (the primary dies, the replica is promoted
// with REPLICAOF NO ONE and the clients are repointed to it) the electors
// recover and elect a leader again.
func TestPrimaryFailover(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		primary, replica := testharness.StartReplicaPair(t, b.Flavor)
		j := newJournal()
		var rds []*redirector
		for _, id := range []string{"a", "b"} {
			rd := &redirector{}
			rd.addr.Store(primary.Addr)
			rds = append(rds, rd)
			o := primary.Options()
			o.Dialer = rd.dial
			o.DialTimeout = 100 * time.Millisecond
			o.MaxRetries = -1
			c := redis.NewClient(o)
			t.Cleanup(func() { _ = c.Close() })
			startContender(t, must(coordination.New(c))(t), id, j, leader.WithLeaseDuration(faultLease), leader.WithRetryDelay(faultRetry))
		}
		first := j.next(t, 5*time.Second)
		// Replication is asynchronous: wait until the replica has the
		// counter. (Killing the primary before that would lose the
		// increment and hand token 1 out again: the documented limit of
		// fencing across failover.)
		admin := redis.NewClient(replica.Options())
		t.Cleanup(func() { _ = admin.Close() })
		waitFor(t, 5*time.Second, "the counter to replicate", func() bool {
			return counterOf(context.Background(), admin, "", fenceKey).Val() == "1"
		})
		primary.Kill()
		select {
		case <-first.term.Context().Done():
		case <-time.After(2 * faultLease):
			t.Fatal("the leader's term survived its primary's death")
		}
		if err := admin.Do(context.Background(), "REPLICAOF", "NO", "ONE").Err(); err != nil {
			t.Fatal(err)
		}
		promoted := time.Now()
		for _, rd := range rds {
			rd.addr.Store(replica.Addr)
		}
		second := j.next(t, 10*time.Second)
		t.Logf("leader %s (token %d) elected %v after the promotion", second.id, second.token, second.start.Sub(promoted))
		// The counter was replicated: the token moved on.
		if second.token <= first.token {
			t.Errorf("token after failover %d, want > %d", second.token, first.token)
		}
		// The new primary reports a term the electors won there. Not
		// necessarily the second one: on a loaded machine a renewal of a
		// 300 ms lease can come late, and the lease then rightly changes
		// hands again (with a higher token) before this read.
		admCoord := must(coordination.New(admin))(t)
		var info leader.Info
		waitFor(t, 5*time.Second, "the new primary to report a term the journal recorded", func() bool {
			var err error
			if info, err = leader.Get(context.Background(), admCoord, leaseKey); err != nil {
				return false
			}
			for _, r := range j.snapshot() {
				if r.id == info.Identity && r.token == info.FencingToken && r.token >= second.token {
					return true
				}
			}
			return false
		})
		if info.FencingToken != second.token {
			t.Logf("the lease changed hands again after the failover: %s holds token %d", info.Identity, info.FencingToken)
		}
	}, testharness.RealOnly(), testharness.StandaloneOnly())
}

// NOPERM ends Run with an error naming it: for an ACL user without
// EVALSHA, and for one with nothing but EVAL and EVALSHA (the scripts'
// commands are denied inside the script: never read as corrupt state).
func TestNoPermEndsRun(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		srv := testharness.StartStandalone(t, b.Flavor)
		admin := redis.NewClient(srv.Options())
		t.Cleanup(func() { _ = admin.Close() })
		if err := admin.Do(context.Background(), "ACL", "SETUSER", "noeval", "on", ">pw", "~*", "&*", "+@all", "-evalsha").Err(); err != nil {
			t.Fatal(err)
		}
		if err := admin.Do(context.Background(), "ACL", "SETUSER", "evalonly", "on", ">pw", "~*", "&*", "-@all",
			"+eval", "+evalsha", "+ping", "+hello", "+client").Err(); err != nil {
			t.Fatal(err)
		}
		for _, user := range []string{"noeval", "evalonly"} {
			t.Run(user, func(t *testing.T) { noPermRun(t, srv, user) })
		}
	}, testharness.RealOnly(), testharness.StandaloneOnly())
}

func noPermRun(t *testing.T, srv *testharness.Server, user string) {
	o := srv.Options()
	o.Username, o.Password = user, "pw"
	c := redis.NewClient(o)
	t.Cleanup(func() { _ = c.Close() })
	opt, reader := meter()
	e := must(leader.New(must(coordination.New(c, opt))(t), leaseKey, fenceKey, "a", leader.WithRetryDelay(10*time.Millisecond)))(t)
	start := time.Now()
	err := e.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "NOPERM") || engine.Classify(err) != engine.Terminal ||
		errors.Is(err, coordination.ErrBadState) {
		t.Fatalf("Run = %v, want a terminal error naming NOPERM", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("Run took %v to give up on NOPERM", took)
	}
	if f := counterPoints(t, reader, "coordination.leader.acquire_failures")[""]; f != 1 {
		t.Errorf("acquire_failures = %d, want 1", f)
	}
	t.Logf("Run: %v", err)
}
