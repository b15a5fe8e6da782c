package lock_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/testharness"
	"github.com/coordkit/coordination/lock"
)

// A user whose ACL forbids the notification channels can still release
// (notifications are best effort), and a blocked waiter of that user still
// gets the lock soon after the release, by re-checking.
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
			holder, err := lock.TryAcquire(ctx, user(), "acl", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			got := make(chan time.Time, 1)
			go func() {
				l, err := lock.Acquire(ctx, user(), "acl", time.Minute)
				if err != nil {
					t.Error(err)
				} else {
					l.Release(ctx)
				}
				got <- time.Now()
			}()
			time.Sleep(700 * time.Millisecond) // past the subscription's confirm bound
			released := time.Now()
			out, err := holder.Release(ctx)
			if err != nil || out != coordination.Released {
				t.Fatalf("Release without channel permission = %v, %v; want Released", out, err)
			}
			if holder.Context().Err() == nil {
				t.Fatal("the released handle's context is not cancelled")
			}
			select {
			case at := <-got:
				if d := at.Sub(released); d > time.Second {
					t.Errorf("waiter without notifications took %v after the release; want the 250ms re-check", d)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("waiter never acquired")
			}
		})
	}
}
