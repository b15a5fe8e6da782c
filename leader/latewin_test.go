package leader_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/leader"
)

// slowFirstScript delays the reply of the first script call by delay (the
// server ran it at once), as a server frozen or a link stalled longer than
// the lease does.
type slowFirstScript struct {
	delay time.Duration
	done  atomic.Bool
}

func (h *slowFirstScript) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *slowFirstScript) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if strings.HasPrefix(cmd.Name(), "eval") && h.done.CompareAndSwap(false, true) {
			time.Sleep(h.delay)
		}
		return err
	}
}
func (h *slowFirstScript) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// A campaign whose winning reply comes after the lease's local deadline
// is not a term: OnElected is not started on a term already over (it was,
// and the term ended at once: the leader flapped after a server froze
// longer than the lease); the lease is given back and the next attempt
// wins a term that OnElected serves with a live context.
func TestLateWinIsNoTerm(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		const lease = 300 * time.Millisecond
		slow := &slowFirstScript{delay: 2 * lease}
		terms := make(chan bool, 4) // whether each OnElected began with a live term
		e := must(leader.New(coordWith(t, b, []redis.Hook{slow}), leaseKey, fenceKey, "late",
			leader.WithLeaseDuration(lease), leader.WithRetryDelay(20*time.Millisecond),
			leader.OnElected(func(ctx context.Context, term *leader.Term) error {
				terms <- ctx.Err() == nil && term.Context().Err() == nil
				<-ctx.Done()
				return nil
			})))(t)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- e.Run(ctx) }()
		select {
		case live := <-terms:
			if !live {
				t.Fatal("OnElected started on a term already over")
			}
		case <-time.After(10 * time.Second):
			t.Fatal("never elected")
		}
		if !slow.done.Load() {
			t.Fatal("the slow reply never happened: the test tested nothing")
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}
