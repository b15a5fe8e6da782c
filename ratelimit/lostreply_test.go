package ratelimit

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/testkit/faultproxy"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// available probes a limiter (its script reads the state without changing
// it) and returns the permits free.
func available(t testing.TB, l *tlim) int64 {
	t.Helper()
	return acquire(t, l, 0).Available()
}

// consumptive are the algorithms whose decisions consume (sent at most
// once); a concurrency acquisition is idempotent by its lease member.
var consumptive = []kind{kFixed, kSliding, kBucket, kGCRA, kComp}

// busyKey makes decisions on l (another process on the same key) as fast
// as it can until stop is called, which returns how many were granted.
func busyKey(t testing.TB, l *tlim) (stop func() int64) {
	var granted atomic.Int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			d, err := l.Allow(context.Background(), 1)
			if err != nil {
				t.Errorf("another caller: %v", err)
				return
			}
			if d.Allowed() {
				granted.Add(1)
			}
		}
	}()
	return func() int64 {
		close(done)
		wg.Wait()
		return granted.Load()
	}
}

// A decision whose reply is lost after it ran is never sent again: through
// a real network fault (the proxy holds the reply longer than the client's
// read timeout, or drops it and closes the connection), on a key that
// another process keeps granting on during the gap (hundreds of grants a
// second or more: far past the 5 the ring of ids of earlier releases
// spanned), the call consumed exactly once on the server (counted from
// the key's state) and its caller gets an error for which
// coordination.IsAmbiguous is true, which the failure mode then answers:
// ReturnError returns it, FailOpen grants (FailedOpen), FailClosed
// refuses. A concurrency acquisition is idempotent by its member: go-redis
// re-sends it and it gets its one lease.
func TestLostReplyConsumesAtMostOnce(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		p := faultproxy.Start(t, b.Server.Addr)
		const capacity = 100_000 // nothing refused, nothing returns within the test
		type tcase struct {
			k    kind
			mode FailureMode
			drop bool
		}
		var cases []tcase
		for _, k := range consumptive {
			cases = append(cases, tcase{k, ReturnError, false}, tcase{k, ReturnError, true})
		}
		cases = append(cases, tcase{kGCRA, FailOpen, false}, tcase{kFixed, FailClosed, false}, tcase{kConc, ReturnError, true},
			tcase{kThrot, ReturnError, false}, tcase{kThrot, ReturnError, true})
		for _, c := range cases {
			name := string(c.k) + "/" + c.mode.String() + "/delayed reply"
			if c.drop {
				name = string(c.k) + "/" + c.mode.String() + "/dropped reply"
			}
			t.Run(name, func(t *testing.T) {
				opt := b.Server.Options()
				opt.Addr = p.Addr()
				opt.ReadTimeout = 300 * time.Millisecond // go-redis would re-send after it, MaxRetries 3
				client := redis.NewClient(opt)
				defer client.Close()
				key := "lost:" + name
				n := capacity
				if c.k == kConc {
					n = 10
				}
				l := build(t, withClient(t, b, client), c.k, key, n, time.Hour, WithFailureMode(c.mode))
				direct := build(t, b.Coordinator(t), c.k, key, n, time.Hour)
				before := available(t, direct) // scripts loaded, state made
				available(t, l)
				var sha string
				if c.k == kConc {
					sha = concAcquireScript.Hash()
				} else {
					sha = l.sp.scripts.decide.Hash()
				}
				var lost *faultproxy.Applied
				if c.drop {
					lost = p.Apply(faultproxy.DropReply(faultproxy.ScriptSHA(sha), 1))
				} else {
					lost = p.Apply(faultproxy.DelayReply(faultproxy.ScriptSHA(sha), 1500*time.Millisecond, 1))
				}
				// Counts what reaches the proxy after the lost one: a re-send.
				resent := p.Apply(faultproxy.DelayCommand(faultproxy.ScriptSHA(sha), time.Nanosecond, faultproxy.Forever))
				var stop func() int64
				if c.k != kConc {
					stop = busyKey(t, direct)
				}
				d, err := l.Allow(context.Background(), 1)
				var others int64
				if stop != nil {
					time.Sleep(50 * time.Millisecond) // more grants after the call, for good measure
					others = stop()
				}
				resent.Remove()
				if lost.Fired() != 1 {
					t.Fatalf("the fault fired %d times", lost.Fired())
				}
				if c.k == kConc {
					if err != nil || !d.Allowed() || resent.Fired() != 1 {
						t.Fatalf("concurrency: %v allowed=%v (re-sent %d), want its lease after go-redis' re-send", err, d.Allowed(), resent.Fired())
					}
					if got := available(t, direct); got != before-1 {
						t.Fatalf("concurrency: %d available, want %d: one lease", got, before-1)
					}
					return
				}
				if resent.Fired() != 0 {
					t.Fatalf("the decision was sent %d times more after its reply was lost, want never", resent.Fired())
				}
				if c.k != kComp && others < 6 {
					t.Logf("only %d other grants during the gap", others)
				}
				switch c.mode {
				case ReturnError:
					if err == nil || !coordination.IsAmbiguous(err) {
						t.Fatalf("Allow: %v (allowed=%v), want an ambiguous error", err, d.Allowed())
					}
				case FailOpen:
					if err != nil || !d.Allowed() || !d.FailedOpen() {
						t.Fatalf("Allow failing open: %v allowed=%v failedOpen=%v, want a grant", err, d.Allowed(), d.FailedOpen())
					}
				case FailClosed:
					if err != nil || d.Allowed() {
						t.Fatalf("Allow failing closed: %v allowed=%v, want a refusal", err, d.Allowed())
					}
				}
				// The lost decision consumed exactly once: the key's count is
				// the others' grants plus one.
				deadline := time.Now().Add(5 * time.Second)
				for {
					consumed := before - available(t, direct) - others
					if consumed == 1 {
						break
					}
					if consumed > 1 || time.Now().After(deadline) {
						t.Fatalf("the call consumed %d permits (others %d), want 1", consumed, others)
					}
					time.Sleep(20 * time.Millisecond) // the delayed command may still be on its way
				}
			})
		}
	}, testharness.RealOnly(), testharness.StandaloneOnly())
}

// A settlement or a refund whose reply is lost is not sent again either:
// an ambiguous error, applied once on the server.
func TestLostReplyAdjustsAtMostOnce(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		p := faultproxy.Start(t, b.Server.Addr)
		ctx := context.Background()
		opt := b.Server.Options()
		opt.Addr = p.Addr()
		opt.ReadTimeout = 300 * time.Millisecond
		client := redis.NewClient(opt)
		defer client.Close()
		coord := withClient(t, b, client)
		for _, k := range []kind{kBucket, kGCRA, kThrot, kLog} {
			key := "lost-settle:" + string(k)
			l := build(t, coord, k, key, 20, time.Hour)
			direct := build(t, b.Coordinator(t), k, key, 20, time.Hour)
			le, err := l.Reserve(ctx, 10)
			if err != nil || !le.Acquired() {
				t.Fatalf("%s: Reserve: %v", k, err)
			}
			lost := p.Apply(faultproxy.DelayReply(faultproxy.ScriptSHA(l.sp.scripts.adjust.Hash()), time.Second, 1))
			if _, err := le.Settle(ctx, 4); err == nil || !coordination.IsAmbiguous(err) || lost.Fired() != 1 {
				t.Fatalf("%s: Settle with its reply lost: %v (fired %d), want an ambiguous error", k, err, lost.Fired())
			}
			waitAvailable(t, direct, 16, k+": a lost settlement of 10 at 4")
			if _, err := le.Settle(ctx, 4); !errors.Is(err, ErrSettled) {
				t.Fatalf("%s: a second Settle after an ambiguous one: %v, want ErrSettled", k, err)
			}
		}
		for _, k := range append(consumptive, kThrot, kLog) {
			key := "lost-refund:" + string(k)
			l := build(t, coord, k, key, 20, time.Hour)
			direct := build(t, b.Coordinator(t), k, key, 20, time.Hour)
			a := grantRefundable(t, l, 3)
			lost := p.Apply(faultproxy.DelayReply(faultproxy.ScriptSHA(l.sp.scripts.adjust.Hash()), time.Second, 1))
			if _, err := a.refund(ctx); err == nil || !coordination.IsAmbiguous(err) || lost.Fired() != 1 {
				t.Fatalf("%s: refund with its reply lost: %v (fired %d), want an ambiguous error", k, err, lost.Fired())
			}
			waitAvailable(t, direct, 20, k+": a lost refund of 3")
		}
	}, testharness.RealOnly(), testharness.StandaloneOnly())
}

// waitAvailable waits (a delayed command may still be on its way) until
// the limiter has want permits available, and fails if it ever has more.
func waitAvailable(t testing.TB, l *tlim, want int64, what kind) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		n := available(t, l)
		if n == want {
			return
		}
		if n > want || time.Now().After(deadline) {
			t.Fatalf("%s: %d available, want %d (applied once)", what, n, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A decision that provably was not sent (the connection could not be
// made, or no connection was free in the pool) is sent again by the
// engine, and consumes once: the caller gets its grant.
func TestUnsentDecisionIsRetriedOnce(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		for _, k := range consumptive {
			t.Run(string(k)+"/refused dials", func(t *testing.T) {
				opt := b.Server.Options()
				var dials, refused atomic.Int32
				dialer := &net.Dialer{Timeout: 5 * time.Second}
				opt.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
					if dials.Add(1) <= 2 {
						refused.Add(1)
						return nil, &net.OpError{Op: "dial", Net: network, Err: errors.New("connection refused (test)")}
					}
					return dialer.DialContext(ctx, network, addr)
				}
				opt.MinRetryBackoff, opt.MaxRetryBackoff = time.Millisecond, 5*time.Millisecond
				client := redis.NewClient(opt)
				defer client.Close()
				key := "unsent:dial:" + string(k)
				direct := build(t, b.Coordinator(t), k, key, 20, time.Hour)
				l := build(t, withClient(t, b, client), k, key, 20, time.Hour)
				d, err := l.Allow(ctx, 1)
				if err != nil || !d.Allowed() || refused.Load() != 2 {
					t.Fatalf("Allow after %d refused dials: %v allowed=%v, want the grant", refused.Load(), err, d.Allowed())
				}
				if n := available(t, direct); n != 19 {
					t.Fatalf("%d available, want 19: consumed once", n)
				}
			})
			t.Run(string(k)+"/pool timeout", func(t *testing.T) {
				opt := b.Server.Options()
				opt.PoolSize, opt.PoolTimeout = 1, 20*time.Millisecond
				opt.MaxRetries, opt.MinRetryBackoff, opt.MaxRetryBackoff = 10, 20*time.Millisecond, 40*time.Millisecond
				client := redis.NewClient(opt)
				defer client.Close()
				key := "unsent:pool:" + string(k)
				direct := build(t, b.Coordinator(t), k, key, 20, time.Hour)
				l := build(t, withClient(t, b, client), k, key, 20, time.Hour)
				available(t, l) // scripts loaded
				var sends atomic.Int32
				client.AddHook(countScripts{&sends})
				held := client.Conn() // the pool's one connection, busy
				if err := held.Ping(ctx).Err(); err != nil {
					t.Fatal(err)
				}
				go func() {
					time.Sleep(60 * time.Millisecond)
					_ = held.Close()
				}()
				d, err := l.Allow(ctx, 1)
				if err != nil || !d.Allowed() {
					t.Fatalf("Allow after pool timeouts: %v allowed=%v, want the grant", err, d.Allowed())
				}
				if sends.Load() < 2 {
					t.Logf("the decision was tried %d times (the connection came back before the first pool timeout)", sends.Load())
				}
				if n := available(t, direct); n != 19 {
					t.Fatalf("%d available, want 19: consumed once", n)
				}
			})
		}
	}, testharness.RealOnly(), testharness.StandaloneOnly())
}

// countScripts is a go-redis hook that counts script calls.
type countScripts struct{ n *atomic.Int32 }

func (countScripts) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h countScripts) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "evalsha" || cmd.Name() == "eval" {
			h.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (countScripts) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
