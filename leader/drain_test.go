package leader_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/leader"
)

// An OnElected that ignores its context is waited for at most the drain
// timeout after the term ended: then renewal stops, the lease is left to
// expire at its TTL (not released), Run returns an error wrapping
// ErrCallback that names the timeout, and another elector is elected once
// the lease expired. OnRevoked ran when the term ended, before the
// timeout. (Before the drain timeout existed, Run never returned and the
// lease was renewed for as long as OnElected ran.)
func TestDrainTimeoutStopsRenewal(t *testing.T) {
	t.Parallel()
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		const lease, drain = time.Second, 300 * time.Millisecond
		stuck := make(chan struct{}) // OnElected returns when the test ends
		t.Cleanup(func() { close(stuck) })
		elected := make(chan struct{})
		var revokedAt atomic.Int64
		e := must(leader.New(b.Coordinator(t), leaseKey, fenceKey, "stuck",
			leader.WithLeaseDuration(lease), leader.WithDrainTimeout(drain),
			leader.OnElected(func(ctx context.Context, _ *leader.Term) error {
				close(elected)
				<-stuck // ignores ctx
				return nil
			}),
			leader.OnRevoked(func(term *leader.Term) error {
				if !errors.Is(context.Cause(term.Context()), leader.ErrStopped) {
					t.Errorf("OnRevoked: cause %v, want ErrStopped", context.Cause(term.Context()))
				}
				revokedAt.Store(time.Now().UnixNano())
				return nil
			})))(t)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- e.Run(ctx) }()
		select {
		case <-elected:
		case <-time.After(10 * time.Second):
			t.Fatal("not elected")
		}
		stopped := time.Now()
		cancel()
		var err error
		select {
		case err = <-done:
		case <-time.After(drain + 10*time.Second):
			t.Fatal("Run did not return after its context ended: OnElected held it")
		}
		returned := time.Now()
		if !errors.Is(err, leader.ErrCallback) || !strings.Contains(err.Error(), "drain timeout (300ms)") {
			t.Fatalf("Run = %v, want ErrCallback naming the drain timeout", err)
		}
		if d := returned.Sub(stopped); d < drain {
			t.Fatalf("Run returned %v after the stop, before the drain timeout %v", d, drain)
		}
		if r := revokedAt.Load(); r == 0 || time.Unix(0, r).After(stopped.Add(drain)) {
			t.Fatalf("OnRevoked ran at %v, want when the term ended (within %v of the stop at %v)", time.Unix(0, r), drain, stopped)
		}
		if e.Current() != nil {
			t.Fatal("Current() is not nil after Run returned")
		}
		// Not released: the lease is still there, and is no longer renewed:
		// it expires within one lease duration of the last renewal.
		raw := b.Raw(t)
		bctx := context.Background()
		if n := raw.Exists(bctx, b.Key(leaseKey)).Val(); n != 1 {
			t.Fatal("the lease was released while OnElected may still act on it")
		}
		waitFor(t, lease+5*time.Second, "the lease to expire", func() bool {
			if b.IsMini() {
				b.Advance(100 * time.Millisecond)
			}
			return raw.Exists(bctx, b.Key(leaseKey)).Val() == 0
		})
		// Another elector leads after it.
		j := newJournal()
		startContender(t, b.Coordinator(t), "next", j)
		if r := j.next(t, 10*time.Second); r.id != "next" {
			t.Fatalf("elected %s, want next", r.id)
		}
	})
}
