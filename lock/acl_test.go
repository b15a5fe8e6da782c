package lock_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// unconfirmed is the re-check period of a waiter whose subscription is not
// confirmed.
const unconfirmed = 250 * time.Millisecond

// A user whose ACL forbids the notification channels can still release
// (notifications are best effort), and a blocked waiter of that user still
// gets the lock soon after the release, by re-checking every 250 ms (its
// subscription is never confirmed).
func TestReleaseWithoutChannelPermission(t *testing.T) {
	for _, flavor := range testharness.Flavors {
		t.Run(flavor, func(t *testing.T) {
			t.Parallel()
			srv := testharness.StartStandalone(t, flavor)
			admin := redis.NewClient(srv.Options())
			defer admin.Close()
			ctx := context.Background()
			if err := admin.Do(ctx, "ACL", "SETUSER", "nochan", "on", ">pw", "~*", "resetchannels", "+@all").Err(); err != nil {
				t.Fatal(err)
			}
			user := func() *coordination.Coordinator {
				o := srv.Options()
				o.Username, o.Password = "nochan", "pw"
				c := redis.NewClient(o)
				t.Cleanup(func() { c.Close() })
				coord, err := coordination.New(c)
				if err != nil {
					t.Fatal(err)
				}
				return coord
			}
			holder, err := tryAcquire(ctx, user(), "acl", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			o := srv.Options()
			o.Username, o.Password = "nochan", "pw"
			wc := redis.NewClient(o)
			t.Cleanup(func() { wc.Close() })
			attempts := &attemptLog{ref: unconfirmed}
			wc.AddHook(attempts)
			waiter, err := coordination.New(wc)
			if err != nil {
				t.Fatal(err)
			}
			got := make(chan struct{})
			go func() {
				defer close(got)
				l, err := acquire(ctx, waiter, "acl", time.Minute)
				if err != nil {
					t.Error(err)
				} else {
					l.Release(ctx)
				}
			}()
			// Past the subscription's confirm bound: the waiter's attempt
			// after its (refused) subscription has been answered.
			attempts.waitReturned(t, 2, "the waiter")
			out, err := holder.Release(ctx)
			released := time.Now()
			if err != nil || out != coordination.Released {
				t.Fatalf("Release without channel permission = %v, %v; want Released", out, err)
			}
			if holder.Context().Err() == nil {
				t.Fatal("the released handle's context is not cancelled")
			}
			select {
			case <-got:
			case <-time.After(10 * time.Second):
				t.Fatal("waiter never acquired")
			}
			// The waiter got the lock at its first attempt sent after the
			// release, and that attempt came from its short re-check: a
			// reference timer of 250 ms, started when the previous attempt
			// came back, measures how late a timer fires on this machine.
			s := attempts.spans()
			last := len(s) - 1
			for i, a := range s[:last] {
				if a.sent.After(released) {
					t.Errorf("the waiter's attempt %d, sent after the release, was refused", i+1)
				}
			}
			gap := s[last].sent.Sub(s[last-1].returned)
			if gap >= engine.DefaultRecheck {
				t.Fatalf("the waiter's attempt after the release came %v after its previous one: the 5 s re-check, not the 250ms one", gap)
			}
			lag := attempts.timerLag(last - 1)
			t.Logf("%d attempts; the last one %v after the previous one (reference timer %v late)", len(s), gap, lag)
			if gap > unconfirmed+lag+200*time.Millisecond {
				t.Errorf("waiter without notifications re-checked %v after its previous attempt (a %v timer started then fired %v late); want the %v re-check", gap, unconfirmed, lag, unconfirmed)
			}
		})
	}
}
