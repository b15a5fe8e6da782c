package ratelimit

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/testkit/faultproxy"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// resend is a go-redis hook that, once armed, lets the next script call
// run on the server, throws its reply away, runs between (other callers'
// decisions), and sends the same command again: what go-redis does after a
// lost reply, with other traffic in the gap.
type resend struct {
	armed   atomic.Bool
	between func()
	sent    atomic.Int32
}

func (r *resend) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r *resend) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if (cmd.Name() != "evalsha" && cmd.Name() != "eval") || !r.armed.CompareAndSwap(true, false) {
			return next(ctx, cmd)
		}
		if err := next(ctx, cmd); err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
			r.armed.Store(true) // it did not run: go-redis sends EVAL next
			return err
		}
		r.sent.Add(1)
		if r.between != nil {
			r.between()
		}
		r.sent.Add(1)
		return next(ctx, cmd) // the re-send
	}
}

func (r *resend) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// hooked returns a coordinator (the test's prefix) whose client re-sends
// its next script call once armed.
func hooked(t testing.TB, b *testharness.Backend) (*resend, *coordination.Coordinator) {
	t.Helper()
	client := b.Client(t)
	hook := &resend{}
	client.AddHook(hook)
	return hook, withClient(t, b, client)
}

// available probes a limiter (its script reads the state without changing
// it) and returns the permits free.
func available(t testing.TB, l *tlim) int64 {
	t.Helper()
	return acquire(t, l, 0).Available()
}

// A decision whose reply is lost and re-sent consumes once and answers the
// first send's decision, for every algorithm, as long as at most 5 other
// grants on the key came in between; with 6 the re-send is no longer
// recognised (the documented bound) and consumes again. A concurrency
// re-send finds its own lease whatever came in between.
func TestLostReplyConsumesOnce(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		const capacity = 20
		for _, k := range every {
			for _, others := range []int{0, 1, 5, 6} {
				t.Run(string(k)+"/"+itoa(int64(others))+" between", func(t *testing.T) {
					hook, coord := hooked(t, b)
					key := "resend:" + string(k) + ":" + itoa(int64(others))
					l := build(t, coord, k, key, capacity, time.Minute)
					o := build(t, b.Coordinator(t), k, key, capacity, time.Minute) // another process
					if n := available(t, l); n != capacity {                       // scripts loaded
						t.Fatalf("available %d before, want %d", n, capacity)
					}
					hook.between = func() {
						for range others {
							if !acquire(t, o, 1).Acquired() {
								t.Error("another caller was refused")
							}
						}
					}
					hook.armed.Store(true)
					le, err := l.Allow(context.Background(), 1)
					if err != nil || !le.Acquired() {
						t.Fatalf("Allow with a re-send: %v acquired=%v, want the first send's grant", err, le.Acquired())
					}
					if hook.sent.Load() != 2 {
						t.Fatalf("the script was sent %d times, want 2", hook.sent.Load())
					}
					consumed := capacity - available(t, l) - int64(others)
					want := int64(1)
					if others > 5 && k != kConc {
						want = 2 // past the ring: decided anew
					}
					if consumed != want {
						t.Fatalf("the call consumed %d permits, want %d", consumed, want)
					}
				})
			}
		}
	})
}

// The same through a real network fault: the proxy drops the decision's
// reply and closes the connection, go-redis re-sends the command on a new
// connection (MaxRetries 3 by default), and the call consumes once and gets
// the grant. With MaxRetries -1 there is no re-send: the call fails
// ambiguously and consumed once.
func TestLostReplyThroughTheNetwork(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		p := faultproxy.Start(t, b.Server.Addr)
		for _, k := range every {
			for _, retries := range []int{0, -1} {
				name := string(k) + "/default retries"
				if retries < 0 {
					name = string(k) + "/MaxRetries -1"
				}
				t.Run(name, func(t *testing.T) {
					opt := b.Server.Options()
					opt.Addr = p.Addr()
					if retries < 0 {
						opt.MaxRetries = -1
					}
					client := redis.NewClient(opt)
					defer client.Close()
					coord := withClient(t, b, client)
					key := "drop:" + name
					l := build(t, coord, k, key, 10, time.Minute)
					direct := build(t, b.Coordinator(t), k, key, 10, time.Minute)
					available(t, l) // scripts loaded
					var sha string
					if k == kConc {
						sha = concAcquireScript.Hash()
					} else {
						sha = l.sp.scripts.decide.Hash()
					}
					lost := p.Apply(faultproxy.DropReply(faultproxy.ScriptSHA(sha), 1))
					// Counts the decision's re-sends (the rule after the drop sees
					// only the commands the drop let by). A total of EVALSHAs
					// also counted the background release of an ambiguous
					// concurrency lease, a different script: "sent 2" under load.
					resent := p.Apply(faultproxy.DelayCommand(faultproxy.ScriptSHA(sha), time.Nanosecond, faultproxy.Forever))
					le, err := l.Allow(context.Background(), 1)
					resent.Remove()
					if lost.Fired() != 1 {
						t.Fatalf("the fault fired %d times", lost.Fired())
					}
					sent := lost.Fired() + resent.Fired()
					if retries < 0 {
						if err == nil || !coordination.IsAmbiguous(err) || sent != 1 {
							t.Fatalf("without retries: %v (sent %d), want an ambiguous error after one send", err, sent)
						}
						if k == kConc {
							waitKeyGone(t, b.Client(t), b.Key(key), "the lost lease's cleanup")
							return
						}
					} else if err != nil || !le.Acquired() || sent != 2 {
						t.Fatalf("with go-redis' re-send: %v acquired=%v (sent %d), want the grant after 2 sends", err, le.Acquired(), sent)
					}
					if n := available(t, direct); n != 9 {
						t.Fatalf("%d permits available after the call, want 9: it consumed %d", n, 10-n)
					}
				})
			}
		}
	}, testharness.RealOnly(), testharness.StandaloneOnly())
}

// Settlements and refunds carry their own ids: a re-sent one applies once.
func TestLostReplyAdjustsOnce(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		for _, k := range []kind{kBucket, kGCRA} {
			hook, coord := hooked(t, b)
			key := "resend-settle:" + string(k)
			l := build(t, coord, k, key, 20, time.Minute)
			le, err := l.Reserve(ctx, 10)
			if err != nil || !le.Acquired() {
				t.Fatalf("%s: Reserve: %v", k, err)
			}
			hook.armed.Store(true)
			if back, err := le.Settle(ctx, 4); err != nil || back != 6 {
				t.Fatalf("%s: Settle with a re-send: %d %v, want 6", k, back, err)
			}
			if n := available(t, l); n != 16 {
				t.Fatalf("%s: %d available after a re-sent settlement, want 16 (applied once)", k, n)
			}
		}
		for _, k := range []kind{kFixed, kSliding, kBucket, kGCRA, kComp} {
			hook, coord := hooked(t, b)
			key := "resend-refund:" + string(k)
			l := build(t, coord, k, key, 20, time.Minute)
			a, c := acquire(t, l, 3), acquire(t, l, 2)
			hook.armed.Store(true)
			if ok, err := a.refund(ctx); err != nil || !ok {
				t.Fatalf("%s: refund with a re-send: %v %v", k, ok, err)
			}
			if n := available(t, l); n != 18 {
				t.Fatalf("%s: %d available after a re-sent refund of 3, want 18 (applied once)", k, n)
			}
			if ok, err := a.refund(ctx); err != nil || ok {
				t.Fatalf("%s: a second refund of the same grant: %v %v, want not applied", k, ok, err)
			}
			if ok, err := c.refund(ctx); err != nil || !ok || available(t, l) != 20 {
				t.Fatalf("%s: the other grant's refund: %v %v", k, ok, err)
			}
		}
	})
}
