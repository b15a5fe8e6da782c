package leader_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/fencing"
	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/fencingcore"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/leader"
)

// Two contenders: the first is elected, the second follows; the leader
// resigns and the follower takes over with the next token. Followers read
// the leader's identity and token.
func TestElectResignTakeOver(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		j := newJournal()
		opts := []leader.Option{leader.WithLeaseDuration(2 * time.Second), leader.WithRetryDelay(50 * time.Millisecond)}
		a := startContender(t, b.Coordinator(t), "worker-a", j, opts...)
		first := j.next(t, 5*time.Second)
		if first.id != "worker-a" || first.token != 1 {
			t.Fatalf("first term: %s token %d, want worker-a token 1", first.id, first.token)
		}
		if cur := a.e.Current(); cur == nil || cur.FencingToken() != 1 || cur.Identity() != "worker-a" || cur.Remaining() <= 0 {
			t.Fatalf("Current() = %+v, want the term with token 1", cur)
		}
		bc := b.Coordinator(t)
		c := startContender(t, bc, "worker-b", j, opts...)
		info := must(c.e.Leader(ctx))(t)
		if info.Identity != "worker-a" || info.FencingToken != 1 || info.TTL <= 0 || info.TTL > 2*time.Second {
			t.Fatalf("Leader() = %+v, want worker-a with token 1 and a TTL in (0, 2s]", info)
		}
		if c.e.Current() != nil {
			t.Fatal("the follower's Current() is not nil")
		}
		a.resign <- struct{}{}
		second := j.next(t, 5*time.Second)
		if second.id != "worker-b" || second.token != 2 {
			t.Fatalf("second term: %s token %d, want worker-b token 2", second.id, second.token)
		}
		if a.e.Current() != nil {
			t.Fatal("the resigned leader's Current() is not nil")
		}
		info = must(leader.Get(ctx, bc, leaseKey))(t)
		if info.Identity != "worker-b" || info.FencingToken != 2 {
			t.Fatalf("Get() = %+v, want worker-b with token 2", info)
		}
		// The resigned term ended with ErrResigned.
		waitFor(t, 2*time.Second, "OnRevoked of the first term", func() bool { return j.snapshot()[0].revokes == 1 })
		if cause := j.snapshot()[0].cause; !errors.Is(cause, leader.ErrResigned) {
			t.Fatalf("first term's cause = %v, want ErrResigned", cause)
		}
		// Stopping the leader releases the lease: nobody leads afterwards
		// (worker-a campaigns again and takes it, so stop it first).
		if err := a.stop(t); err != nil {
			t.Fatalf("Run of worker-a: %v", err)
		}
		if err := c.stop(t); err != nil {
			t.Fatalf("Run of worker-b: %v", err)
		}
		if _, err := leader.Get(ctx, bc, leaseKey); !errors.Is(err, leader.ErrNoLeader) {
			t.Fatalf("after both stopped: %v, want ErrNoLeader", err)
		}
		if n := must(b.Client(t).Exists(ctx, b.Key(leaseKey)).Result())(t); n != 0 {
			t.Fatal("the lease key still exists after the leader stopped")
		}
		terms := j.snapshot()
		if cause := terms[len(terms)-1].cause; !errors.Is(cause, leader.ErrStopped) || !errors.Is(cause, context.Canceled) {
			t.Fatalf("last term's cause = %v, want ErrStopped joined with context.Canceled", cause)
		}
		j.check(t)
	})
}

// The identity is stored in the lease hash beside the fencing lock's
// fields, and a lease taken by a plain fencing lock reads as a leader
// without identity.
func TestLeaseLayout(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		j := newJournal()
		c := startContender(t, b.Coordinator(t), "id with spaces \x00 and bytes", j)
		j.next(t, 5*time.Second)
		h := must(b.Raw(t).HGetAll(ctx, b.Key(leaseKey)).Result())(t)
		if h["holder"] != "id with spaces \x00 and bytes" || h["fence"] != "1" || len(h["owner"]) != 22 {
			t.Fatalf("lease hash = %q", h)
		}
		if pttl := must(b.Client(t).PTTL(ctx, b.Key(leaseKey)).Result())(t); pttl <= 0 || pttl > leader.DefaultLeaseDuration {
			t.Fatalf("lease PTTL = %v, want (0, 15s]", pttl)
		}
		must(0, c.stop(t))(t)
		lk := must(must(fencing.New(b.Coordinator(t), leaseKey, fenceKey))(t).TryAcquire(ctx, time.Minute))(t)
		info := must(leader.Get(ctx, b.Coordinator(t), leaseKey))(t)
		if info.Identity != "" || info.FencingToken != 2 {
			t.Fatalf("Get() on a plain fencing lease = %+v, want no identity and token 2", info)
		}
		must(lk.Release(ctx))(t)
	})
}

func TestInvalidConfiguration(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Client(t)
		k := testharness.CountCommands(raw)
		coord := must(coordination.New(raw, coordination.WithKeyPrefix(b.Prefix())))(t)
		cases := []struct {
			arg string
			new func() (*leader.Elector, error)
		}{
			{"coord", func() (*leader.Elector, error) { return leader.New(nil, leaseKey, fenceKey, "a") }},
			{"leaseKey", func() (*leader.Elector, error) { return leader.New(coord, "", fenceKey, "a") }},
			{"fenceKey", func() (*leader.Elector, error) { return leader.New(coord, leaseKey, "", "a") }},
			{"fenceKey", func() (*leader.Elector, error) { return leader.New(coord, leaseKey, leaseKey, "a") }},
			{"identity", func() (*leader.Elector, error) { return leader.New(coord, leaseKey, fenceKey, "") }},
			{"leaseDuration", func() (*leader.Elector, error) {
				return leader.New(coord, leaseKey, fenceKey, "a", leader.WithLeaseDuration(9*time.Millisecond))
			}},
			{"leaseDuration", func() (*leader.Elector, error) {
				return leader.New(coord, leaseKey, fenceKey, "a", leader.WithLeaseDuration(-time.Second))
			}},
			{"retryDelay", func() (*leader.Elector, error) {
				return leader.New(coord, leaseKey, fenceKey, "a", leader.WithRetryDelay(0))
			}},
			{"drainTimeout", func() (*leader.Elector, error) {
				return leader.New(coord, leaseKey, fenceKey, "a", leader.WithDrainTimeout(0))
			}},
			{"drainTimeout", func() (*leader.Elector, error) {
				return leader.New(coord, leaseKey, fenceKey, "a", leader.WithDrainTimeout(time.Microsecond))
			}},
			{"OnElected", func() (*leader.Elector, error) {
				return leader.New(coord, leaseKey, fenceKey, "a", leader.OnElected(nil))
			}},
			{"OnRevoked", func() (*leader.Elector, error) {
				return leader.New(coord, leaseKey, fenceKey, "a", leader.OnRevoked(nil))
			}},
			{"OnNewLeader", func() (*leader.Elector, error) {
				return leader.New(coord, leaseKey, fenceKey, "a", leader.OnNewLeader(nil))
			}},
		}
		for _, c := range cases {
			e, err := c.new()
			name, _ := check.ArgumentName(err)
			if e != nil || !errors.Is(err, coordination.ErrInvalidArgument) || name != c.arg {
				t.Errorf("%s: New = %v, %v; want an ErrInvalidArgument naming %q", c.arg, e, err, c.arg)
			}
		}
		if _, err := leader.New(coord, "{a}:lease", "{b}:fence", "a"); !errors.Is(err, coordination.ErrInvalidArgument) {
			t.Errorf("cross-slot keys: %v, want ErrInvalidArgument (cross-slot)", err)
		}
		if _, err := leader.Get(ctx, coord, ""); !errors.Is(err, coordination.ErrInvalidArgument) {
			t.Errorf("Get with an empty key: %v", err)
		}
		if err := leader.Observe(ctx, coord, leaseKey, 0, func(leader.Info) {}); !errors.Is(err, coordination.ErrInvalidArgument) {
			t.Errorf("Observe with poll 0: %v", err)
		}
		var nilElector *leader.Elector
		if err := nilElector.Run(ctx); !errors.Is(err, coordination.ErrInvalidArgument) {
			t.Errorf("Run on a nil elector: %v", err)
		}
		if k.Count() != 0 {
			t.Fatalf("invalid configuration sent %v", k.Names())
		}
		e := must(leader.New(coord, leaseKey, fenceKey, "a"))(t)
		if e.LeaseDuration() != 15*time.Second || e.RetryDelay() != time.Second || e.Identity() != "a" {
			t.Fatalf("defaults: lease %v retry %v identity %q", e.LeaseDuration(), e.RetryDelay(), e.Identity())
		}
		// The lease duration is reported as sent: rounded up to whole ms.
		for d, want := range map[time.Duration]time.Duration{10500 * time.Microsecond: 11 * time.Millisecond, 12 * time.Millisecond: 12 * time.Millisecond} {
			if got := must(leader.New(coord, leaseKey, fenceKey, "a", leader.WithLeaseDuration(d)))(t).LeaseDuration(); got != want {
				t.Errorf("WithLeaseDuration(%v): LeaseDuration() = %v, want %v", d, got, want)
			}
		}
	})
}

func TestRunTwiceAtOnce(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		j := newJournal()
		c := startContender(t, b.Coordinator(t), "a", j)
		j.next(t, 5*time.Second)
		const want = `coordination: leader campaign "{election}:lease": Run is already running`
		if err := c.e.Run(context.Background()); !errors.Is(err, leader.ErrAlreadyRunning) || err.Error() != want {
			t.Fatalf("second Run: %v, want ErrAlreadyRunning: %q", err, want)
		}
		must(0, c.stop(t))(t)
		// After Run returned it may run again.
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- c.e.Run(ctx) }()
		j.next(t, 5*time.Second)
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run again: %v", err)
		}
		j.check(t)
	})
}

// A key of the wrong type and a corrupt fencing counter are terminal: Run
// ends with the error at once, writing nothing.
func TestTerminalServerErrorsEndRun(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Raw(t)
		must(raw.Set(ctx, b.Key(leaseKey), "not a hash", 0).Result())(t)
		opt, reader := meter()
		e := must(leader.New(b.Coordinator(t, opt), leaseKey, fenceKey, "a", leader.WithRetryDelay(10*time.Millisecond)))(t)
		start := time.Now()
		err := e.Run(ctx)
		if !errors.Is(err, coordination.ErrBadState) || time.Since(start) > 2*time.Second {
			t.Fatalf("Run on a wrong-type lease key: %v after %v, want ErrBadState (wrong type) at once", err, time.Since(start))
		}
		if got := counterPoints(t, reader, "coordination.leader.acquire_failures"); got[""] != 1 {
			t.Fatalf("acquire_failures = %v, want 1", got)
		}
		if _, err := leader.Get(ctx, b.Coordinator(t), leaseKey); !errors.Is(err, coordination.ErrBadState) {
			t.Fatalf("Get on a wrong-type key: %v", err)
		}
		must(raw.Del(ctx, b.Key(leaseKey)).Result())(t)
		must(raw.Set(ctx, b.Key(fenceKey), "-4", 0).Result())(t)
		err = e.Run(ctx)
		if !errors.Is(err, coordination.ErrBadState) {
			t.Fatalf("Run with a negative counter: %v, want ErrBadState", err)
		}
		if n := must(raw.Exists(ctx, b.Key(leaseKey)).Result())(t); n != 0 {
			t.Fatal("a lease was created")
		}
	})
}

// Transient replies (LOADING, injected by a client hook, and timeouts) are
// retried after half to one retry delay and counted; the elector is elected once they
// stop.
func TestTransientErrorsAreRetried(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		for _, inj := range []error{redisErr("LOADING Redis is loading the dataset in memory"), netErr{}} {
			h := &failingHook{err: inj, only: fencingcore.Acquire.Hash()}
			h.left.Store(5)
			h.on.Store(true)
			opt, reader := meter()
			coord := coordWith(t, b, []redis.Hook{h}, opt)
			j := newJournal()
			start := time.Now()
			c := startContender(t, coord, "a", j, leader.WithRetryDelay(20*time.Millisecond))
			r := j.next(t, 5*time.Second)
			if took := time.Since(start); took < 5*10*time.Millisecond {
				t.Errorf("%v: elected after %v, before five half retry delays", inj, took)
			}
			if got := counterPoints(t, reader, "coordination.leader.acquire_failures"); got[""] != 5 {
				t.Errorf("%v: acquire_failures = %v, want 5", inj, got)
			}
			must(0, c.stop(t))(t)
			_ = r
			// A lost reply (timeout) leaves nothing behind: the next test
			// round starts from a free lease.
			waitFor(t, 5*time.Second, "the lease to be free", func() bool {
				_, err := leader.Get(context.Background(), b.Coordinator(t), leaseKey)
				return errors.Is(err, leader.ErrNoLeader)
			})
		}
	})
}

// Callback errors and panics end Run with an error wrapping ErrCallback,
// after the lease was released.
func TestCallbackFailuresEndRunAfterRelease(t *testing.T) {
	boom := errors.New("boom")
	cases := []struct {
		name    string
		elected func(ctx context.Context, term *leader.Term) error
		revoked func(term *leader.Term) error
		want    string
	}{
		{"elected-error", func(context.Context, *leader.Term) error { return boom }, nil, "OnElected: boom"},
		{"elected-panic", func(context.Context, *leader.Term) error { panic("kaput") }, nil, "OnElected panicked: kaput"},
		{"revoked-error", func(context.Context, *leader.Term) error { return nil }, func(*leader.Term) error { return boom }, "OnRevoked: boom"},
		{"revoked-panic", func(context.Context, *leader.Term) error { return nil }, func(*leader.Term) error { panic("kaput") }, "OnRevoked panicked: kaput"},
	}
	// Run's error names the operation and the lease key, as a campaign's
	// does.
	const named = `coordination: leader campaign "{election}:lease": callback failed: `
	for i := range cases {
		cases[i].want = named + cases[i].want
	}
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Raw(t)
		for _, tc := range cases {
			var leaseSeen atomic.Int64
			opts := []leader.Option{leader.OnElected(func(ctx context.Context, term *leader.Term) error {
				n, _ := raw.Exists(ctx, b.Key(leaseKey)).Result()
				leaseSeen.Store(n)
				return tc.elected(ctx, term)
			})}
			if tc.revoked != nil {
				opts = append(opts, leader.OnRevoked(tc.revoked))
			}
			e := must(leader.New(b.Coordinator(t), leaseKey, fenceKey, "a", opts...))(t)
			err := e.Run(ctx)
			if !errors.Is(err, leader.ErrCallback) || err == nil || err.Error() != tc.want {
				t.Errorf("%s: Run = %v, want ErrCallback: %q", tc.name, err, tc.want)
			}
			if tc.name == "elected-error" && !errors.Is(err, boom) {
				t.Errorf("%s: Run = %v does not wrap the callback's error", tc.name, err)
			}
			if leaseSeen.Load() != 1 {
				t.Errorf("%s: the lease did not exist while elected", tc.name)
			}
			if n := must(raw.Exists(ctx, b.Key(leaseKey)).Result())(t); n != 0 {
				t.Errorf("%s: the lease was not released before Run returned", tc.name)
			}
			if e.Current() != nil {
				t.Errorf("%s: Current() is not nil after Run returned", tc.name)
			}
		}
	})
}

// An OnElected that returns its context's error after the term ended is a
// normal return, not a failure.
func TestCallbackReturningContextErrorIsBenign(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		e := must(leader.New(b.Coordinator(t), leaseKey, fenceKey, "a",
			leader.OnElected(func(ctx context.Context, _ *leader.Term) error {
				<-ctx.Done()
				return ctx.Err()
			})))(t)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- e.Run(ctx) }()
		waitFor(t, 5*time.Second, "election", func() bool { return e.Current() != nil })
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run = %v, want nil", err)
		}
	})
}

// Both callbacks finish before the next campaign attempt, and the lease is
// released only after both. OnRevoked runs when the term ends, without
// waiting for OnElected: a revoked term's OnElected returns only once its
// OnRevoked has started (issue 24; this test asserted the opposite order,
// "never at the same time", before).
func TestCallbacksFinishBeforeNextCampaign(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		var (
			mu       sync.Mutex
			inside   int
			bad      []string
			attempts atomic.Int64
			terms    atomic.Int64
			waiting  atomic.Int64 // token of the term waiting to be revoked
		)
		hook := hooks.Func(func(ctx context.Context, op hooks.Operation) (context.Context, hooks.Done, error) {
			if op.Name == hooks.LeaderCampaign {
				attempts.Add(1)
				mu.Lock()
				if inside != 0 {
					bad = append(bad, "a campaign attempt started while a callback ran")
				}
				mu.Unlock()
			}
			return ctx, nil, nil
		})
		enter := func() { mu.Lock(); inside++; mu.Unlock() }
		leave := func() { mu.Lock(); inside--; mu.Unlock() }
		var revoking sync.Map // *leader.Term -> chan struct{}, closed when its OnRevoked starts
		revoked := func(term *leader.Term) chan struct{} {
			c, _ := revoking.LoadOrStore(term, make(chan struct{}))
			return c.(chan struct{})
		}
		coord := b.Coordinator(t, coordination.WithHooks(hook))
		raw := b.Raw(t)
		e := must(leader.New(coord, leaseKey, fenceKey, "a", leader.WithRetryDelay(5*time.Millisecond),
			leader.WithLeaseDuration(200*time.Millisecond),
			leader.OnElected(func(ctx context.Context, term *leader.Term) error {
				enter()
				defer leave()
				if terms.Add(1)%2 == 0 {
					waiting.Store(term.FencingToken())
					<-ctx.Done() // every other term waits to be revoked
					select {
					case <-revoked(term):
					case <-time.After(10 * time.Second):
						mu.Lock()
						bad = append(bad, "OnRevoked did not start while a revoked term's OnElected was still running")
						mu.Unlock()
					}
				}
				time.Sleep(20 * time.Millisecond) // drain slowly
				return nil
			}),
			leader.OnRevoked(func(term *leader.Term) error {
				enter()
				defer leave()
				close(revoked(term))
				time.Sleep(10 * time.Millisecond)
				// A resigned or stopped term's lease is still there: it is
				// released after both callbacks.
				cause := context.Cause(term.Context())
				kept := errors.Is(cause, leader.ErrResigned) || errors.Is(cause, leader.ErrStopped)
				if n, _ := raw.Exists(context.Background(), b.Key(leaseKey)).Result(); n != 1 && kept {
					mu.Lock()
					bad = append(bad, "the lease was released before OnRevoked returned")
					mu.Unlock()
				}
				return nil
			})))(t)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- e.Run(ctx) }()
		for terms.Load() < 6 {
			// Revoke a waiting term by taking its lease away.
			if tok := waiting.Load(); tok != 0 && raw.HGet(context.Background(), b.Key(leaseKey), "fence").Val() == strconv.FormatInt(tok, 10) {
				raw.Del(context.Background(), b.Key(leaseKey))
			}
			time.Sleep(5 * time.Millisecond)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		for _, s := range bad {
			t.Error(s)
		}
		if attempts.Load() < 6 {
			t.Fatalf("%d campaign attempts for 6 terms", attempts.Load())
		}
	})
}

// Each campaign attempt is admitted once as LEADER CAMPAIGN and is one
// script call; reads are LEADER READ.
func TestHooksAndRoundTrips(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		j := newJournal()
		startContender(t, b.Coordinator(t), "leader", j)
		j.next(t, 5*time.Second)

		var mu sync.Mutex
		var ops []string
		hook := hooks.Func(func(ctx context.Context, op hooks.Operation) (context.Context, hooks.Done, error) {
			return ctx, func(o hooks.Outcome, err error) {
				mu.Lock()
				ops = append(ops, op.Name+" "+op.Primitive+" "+o.String())
				mu.Unlock()
			}, nil
		})
		raw := b.Client(t)
		must(leader.Get(ctx, must(coordination.New(raw, coordination.WithKeyPrefix(b.Prefix())))(t), leaseKey))(t) // connect, load the script
		k := testharness.CountCommands(raw)
		coord := must(coordination.New(raw, coordination.WithKeyPrefix(b.Prefix()), coordination.WithHooks(hook)))(t)
		info := must(leader.Get(ctx, coord, leaseKey))(t)
		if info.Identity != "leader" || k.Count() != 1 || !strings.HasPrefix(k.Names()[0], "EVAL") {
			t.Fatalf("Get = %+v with commands %v, want one script call", info, k.Names())
		}
		e := must(leader.New(coord, leaseKey, fenceKey, "follower", leader.WithRetryDelay(time.Hour)))(t)
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		k.Reset()
		go func() { done <- e.Run(runCtx) }()
		// A follower makes two attempts (the second right after subscribing
		// to release notifications), then waits.
		waitFor(t, 5*time.Second, "two campaign attempts", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(ops) >= 3
		})
		time.Sleep(50 * time.Millisecond)
		cancel()
		must(0, <-done)(t)
		mu.Lock()
		got := strings.Join(ops, "; ")
		mu.Unlock()
		want := "LEADER READ leader succeeded; " +
			"LEADER CAMPAIGN leader succeeded; LEADER CAMPAIGN leader succeeded"
		if got != want {
			t.Fatalf("hook outcomes:\n got %s\nwant %s", got, want)
		}
		evals := 0
		for _, n := range k.Names() {
			if strings.HasPrefix(n, "EVAL") {
				evals++
			}
		}
		if evals != 2 {
			t.Fatalf("commands %v, want exactly two script calls for two attempts", k.Names())
		}
	})
}

// coordination.leader.changes counts elections and revocations with only a
// state attribute; acquire_failures counts failed attempts.
func TestMetrics(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		opt, reader := meter()
		coord := b.Coordinator(t, opt)
		j := newJournal()
		c := startContender(t, coord, "secret-identity", j, leader.WithRetryDelay(5*time.Millisecond))
		for range 3 {
			j.next(t, 5*time.Second)
			c.resign <- struct{}{}
		}
		j.next(t, 5*time.Second)
		must(0, c.stop(t))(t)
		got := counterPoints(t, reader, "coordination.leader.changes")
		if got["state=elected"] != 4 || got["state=revoked"] != 4 || len(got) != 2 {
			t.Fatalf("coordination.leader.changes = %v, want elected 4, revoked 4 and no other attributes", got)
		}
		if f := counterPoints(t, reader, "coordination.leader.acquire_failures"); f[""] != 0 {
			t.Fatalf("acquire_failures = %v, want 0", f)
		}
		j.check(t)
	})
}

// Observe reports the current leader, then each change, including "no
// leader".
func TestObserve(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		seen := make(chan leader.Info, 100)
		obsDone := make(chan error, 1)
		go func() {
			obsDone <- leader.Observe(ctx, b.Coordinator(t), leaseKey, 20*time.Millisecond, func(i leader.Info) { seen <- i })
		}()
		next := func() leader.Info {
			t.Helper()
			select {
			case i := <-seen:
				return i
			case <-time.After(5 * time.Second):
				t.Fatal("Observe reported nothing")
				return leader.Info{}
			}
		}
		if i := next(); i != (leader.Info{}) {
			t.Fatalf("first report %+v, want no leader", i)
		}
		j := newJournal()
		a := startContender(t, b.Coordinator(t), "a", j)
		j.next(t, 5*time.Second)
		if i := next(); i.Identity != "a" || i.FencingToken != 1 {
			t.Fatalf("report %+v, want a with token 1", i)
		}
		must(0, a.stop(t))(t)
		if i := next(); i.FencingToken != 0 {
			t.Fatalf("report %+v, want no leader", i)
		}
		startContender(t, b.Coordinator(t), "b", j)
		if i := next(); i.Identity != "b" || i.FencingToken != 2 {
			t.Fatalf("report %+v, want b with token 2", i)
		}
		cancel()
		if err := <-obsDone; err != nil {
			t.Fatalf("Observe = %v, want nil after cancel", err)
		}
		select {
		case i := <-seen:
			t.Fatalf("unexpected report %+v", i)
		default:
		}
	})
}
