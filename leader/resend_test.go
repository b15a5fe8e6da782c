package leader_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/coordkit/coordination/internal/fencingcore"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/leader"
)

// Each command of an elector re-sent by go-redis after a lost reply (the
// server ran the first send) reports what the first send did: a re-sent
// campaign wins one term with the fencing token it drew (the counter moves
// once), a re-sent renewal keeps the term, and a re-sent resignation
// releases the lease (the engine, which counted two writes, reports
// Released) and ends the term with ErrResigned, the counter untouched.
func TestReSentCampaignRenewalAndResignation(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		coord, hook := b.Resending(t)
		raw := b.Client(t)
		j := newJournal()
		const lease = 600 * time.Millisecond
		hook.Arm()
		a := startContender(t, coord, "worker-a", j, leader.WithLeaseDuration(lease), leader.WithRetryDelay(time.Hour))
		first := j.next(t, 5*time.Second)
		if n, cmd := hook.Sent(); n != 2 || (cmd != "evalsha" && cmd != "eval") {
			t.Fatalf("the campaign's script was sent %d times (%s), want 2", n, cmd)
		}
		if first.token != 1 || must(counterOf(ctx, raw, b.Prefix(), b.Key(fenceKey)).Int64())(t) != 1 {
			t.Fatalf("term token %d, counter %v; want 1 and 1 (one increment)", first.token, counterOf(ctx, raw, b.Prefix(), b.Key(fenceKey)).Val())
		}

		hook.ArmScript(fencingcore.Refresh.Hash()) // the next keep-alive renewal
		waitFor(t, 5*time.Second, "a re-sent renewal", func() bool { n, _ := hook.Sent(); return n == 2 })
		time.Sleep(lease) // past the first TTL: only renewals keep the term
		if a.e.Current() == nil || first.term.Context().Err() != nil {
			t.Fatalf("the term ended after a re-sent renewal: %v", context.Cause(first.term.Context()))
		}

		// The resignation's release: a keep-alive renewal may still go out
		// before it (the lease is renewed until it is released), so the
		// release script is the one armed, not whatever comes next.
		hook.ArmScript(fencingcore.Release.Hash())
		a.resign <- struct{}{}
		waitFor(t, 5*time.Second, "OnRevoked", func() bool { return j.snapshot()[0].revokes == 1 })
		if cause := j.snapshot()[0].cause; !errors.Is(cause, leader.ErrResigned) {
			t.Fatalf("term cause = %v, want ErrResigned", cause)
		}
		waitFor(t, 5*time.Second, "the re-sent release", func() bool { n, _ := hook.Sent(); return n == 2 })
		if n := must(raw.Exists(ctx, b.Key(leaseKey)).Result())(t); n != 0 {
			t.Fatal("the lease still exists after a re-sent resignation")
		}
		if must(counterOf(ctx, raw, b.Prefix(), b.Key(fenceKey)).Int64())(t) != 1 {
			t.Fatal("the counter moved after the resignation")
		}
		// The release was decided by the engine (two writes counted, the
		// lease held when it began), not by a release mark: none exists.
		if n := must(raw.Exists(ctx, b.Key(leaseKey)+"\x00released").Result())(t); n != 0 {
			t.Fatal("a release mark was written")
		}
		if err := a.stop(t); err != nil {
			t.Fatalf("Run: %v", err)
		}
		j.check(t)
	})
}
