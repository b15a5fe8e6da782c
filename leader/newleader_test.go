package leader_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/leader"
)

// OnNewLeader tells an elector who leads while its Run runs: its own term,
// then the other elector's after it resigned (a higher token), and nothing
// after Run returned.
func TestOnNewLeader(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		var (
			mu   sync.Mutex
			seen []leader.Info
		)
		names := func() string {
			mu.Lock()
			defer mu.Unlock()
			var s []string
			for _, i := range seen {
				s = append(s, i.Identity)
			}
			return strings.Join(s, ",")
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		elected := make(chan struct{})
		a := must(leader.New(b.Coordinator(t), leaseKey, fenceKey, "a",
			leader.WithRetryDelay(50*time.Millisecond),
			leader.OnNewLeader(func(i leader.Info) {
				mu.Lock()
				seen = append(seen, i)
				mu.Unlock()
			}),
			leader.OnElected(func(ctx context.Context, _ *leader.Term) error {
				close(elected)
				return nil // resign at once: b takes over
			})))(t)
		done := make(chan error, 1)
		go func() { done <- a.Run(ctx) }()
		<-elected
		j := newJournal()
		startContender(t, b.Coordinator(t), "b", j, leader.WithRetryDelay(50*time.Millisecond))
		waitFor(t, 10*time.Second, "a told that b leads", func() bool { return strings.HasSuffix(names(), "b") })
		mu.Lock()
		var fa, fb int64
		for _, i := range seen {
			switch i.Identity {
			case "a":
				fa = i.FencingToken
			case "b":
				fb = i.FencingToken
			}
		}
		mu.Unlock()
		if fb <= fa {
			t.Fatalf("b's token %d is not above a's %d (seen %s)", fb, fa, names())
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		after := names()
		time.Sleep(200 * time.Millisecond)
		if names() != after {
			t.Fatalf("OnNewLeader was called after Run returned: %s -> %s", after, names())
		}
	})
}
