package leader_test

import (
	"context"
	"errors"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/leader"
)

// The errors that end Run while it leads name the operation and the lease
// key as a campaign's errors do: the coordinator's Shutdown (the same
// error as a campaign after Shutdown, wrapping ErrClosed; it used to read
// "leader: renewal: coordination: closed") and a renewal that failed
// terminally (a corrupt lease key: ErrBadState).
func TestRunErrorsWhileLeadingNameOperationAndKey(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		run := func(coord *coordination.Coordinator, opts ...leader.Option) (elected <-chan struct{}, done <-chan error) {
			t.Helper()
			el := make(chan struct{})
			d := make(chan error, 1)
			opts = append(opts, leader.OnElected(func(ctx context.Context, _ *leader.Term) error {
				close(el)
				<-ctx.Done()
				return nil
			}))
			e := must(leader.New(coord, leaseKey, fenceKey, "a", opts...))(t)
			go func() { d <- e.Run(ctx) }()
			select {
			case <-el:
			case err := <-d:
				t.Fatalf("Run returned before it was elected: %v", err)
			case <-time.After(10 * time.Second):
				t.Fatal("not elected")
			}
			return el, d
		}
		wait := func(done <-chan error) error {
			t.Helper()
			select {
			case err := <-done:
				return err
			case <-time.After(20 * time.Second):
				t.Fatal("Run did not return")
				return nil
			}
		}

		coord := b.Coordinator(t)
		_, done := run(coord)
		if err := coord.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		const closed = `coordination: leader campaign "{election}:lease": closed: the coordinator was shut down`
		if err := wait(done); !errors.Is(err, coordination.ErrClosed) || err.Error() != closed {
			t.Fatalf("Run after Shutdown while leading = %v, want %q", err, closed)
		}

		// The lease key (left by the shut-down leader until its TTL) is
		// replaced by a value of another type before the next leader's
		// first renewal, at half its lease. The lease is long enough that
		// the renewal, not the local deadline 2 s later, ends the term
		// even when the machine stalls (an expired term would campaign
		// again and fail there instead).
		raw := b.Raw(t)
		if err := raw.Del(ctx, b.Key(leaseKey)).Err(); err != nil {
			t.Fatal(err)
		}
		_, done = run(b.Coordinator(t), leader.WithLeaseDuration(4*time.Second))
		if err := raw.Set(ctx, b.Key(leaseKey), "garbage", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		const renewal = `coordination: leader campaign "{election}:lease": renewal failed: key holds the wrong Redis type (COORD_WRONGTYPE)`
		if err := wait(done); !errors.Is(err, coordination.ErrBadState) || err.Error() != renewal {
			t.Fatalf("Run after a terminal renewal failure = %v, want %q", err, renewal)
		}
	})
}
