package leader_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/leader"
)

// Proclaim changes the identity readers see, keeps the term's token and
// lease, notifies observers at once, is one command, refuses bad input
// without sending anything, and reports ErrLost once the term is over.
func TestProclaim(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		coord := b.Coordinator(t)
		terms := make(chan *leader.Term, 1)
		el := must(leader.New(coord, leaseKey, fenceKey, "10.0.0.7:8080",
			leader.WithLeaseDuration(time.Minute), // no renewal while commands are counted
			leader.OnElected(func(ctx context.Context, term *leader.Term) error {
				terms <- term
				<-ctx.Done()
				return nil
			})))(t)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- el.Run(ctx) }()
		term := <-terms

		// An observer polling once an hour learns of the proclamation at once.
		var mu sync.Mutex
		var seen []leader.Info
		octx, ostop := context.WithCancel(context.Background())
		odone := make(chan error, 1)
		ocoord := b.Coordinator(t)
		go func() {
			odone <- leader.Observe(octx, ocoord, leaseKey, time.Hour, func(i leader.Info) {
				mu.Lock()
				seen = append(seen, i)
				mu.Unlock()
			})
		}()
		last := func() leader.Info {
			mu.Lock()
			defer mu.Unlock()
			if len(seen) == 0 {
				return leader.Info{}
			}
			return seen[len(seen)-1]
		}
		waitFor(t, 10*time.Second, "the observer's first read", func() bool { return last().FencingToken == term.FencingToken() })
		// The term's start, recorded by its announcement on the server's
		// clock (this host's; miniredis uses the real time too).
		start := last().Start
		if d := time.Since(start); start.IsZero() || d < -2*time.Second || d > 30*time.Second || !start.Equal(start.Truncate(time.Millisecond)) {
			t.Fatalf("Info.Start = %v (%v ago), want the term's start in whole milliseconds", start, d)
		}

		counter := testharness.CountCommands(coord.Client())
		if err := term.Proclaim(context.Background(), "10.0.0.7:9090"); err != nil {
			t.Fatalf("Proclaim: %v", err)
		}
		if n := counter.Count(); n != 1 {
			t.Fatalf("Proclaim sent %d commands (%v), want 1", n, counter.Names())
		}
		info := must(leader.Get(context.Background(), coord, leaseKey))(t)
		if info.Identity != "10.0.0.7:9090" || info.FencingToken != term.FencingToken() || info.TTL <= 0 || !info.Start.Equal(start) {
			t.Fatalf("after Proclaim, Get = %+v; want the new identity, the same token, a live lease and the term's start %v", info, start)
		}
		if term.Identity() != "10.0.0.7:8080" {
			t.Fatalf("Term.Identity = %q, want the elector's", term.Identity())
		}
		waitFor(t, 10*time.Second, "the observer told of the proclamation", func() bool { return last().Identity == "10.0.0.7:9090" })

		counter.Reset()
		for _, c := range []struct {
			arg string
			err error
		}{
			{"identity", term.Proclaim(context.Background(), "")},
			{"identity", term.Proclaim(context.Background(), string(make([]byte, 257)))},
			{"ctx", term.Proclaim(nil, "x")}, //nolint:staticcheck // a nil context on purpose
			{"term", (*leader.Term)(nil).Proclaim(context.Background(), "x")},
			{"term", new(leader.Term).Proclaim(context.Background(), "x")},
		} {
			if name, ok := check.ArgumentName(c.err); !ok || name != c.arg || !errors.Is(c.err, coordination.ErrInvalidArgument) {
				t.Errorf("err = %v, want an invalid-argument error naming %q", c.err, c.arg)
			}
		}
		if n := counter.Count(); n != 0 {
			t.Fatalf("bad input sent %d commands", n)
		}

		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run: %v", err)
		}
		if err := term.Proclaim(context.Background(), "late"); !errors.Is(err, coordination.ErrLost) {
			t.Fatalf("Proclaim after the term = %v, want ErrLost", err)
		}
		ostop()
		<-odone
	})
}

// A won term is announced: an observer polling once an hour, started
// while nobody leads, learns of the new leader at once, and of each later
// term as it starts (every term of a sequence of resignations is seen
// when terms last longer than a read).
func TestObserveSeesEveryTerm(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		coord := b.Coordinator(t)
		var mu sync.Mutex
		var seen []int64
		octx, ostop := context.WithCancel(context.Background())
		defer ostop()
		odone := make(chan error, 1)
		go func() {
			odone <- leader.Observe(octx, coord, leaseKey, time.Hour, func(i leader.Info) {
				mu.Lock()
				seen = append(seen, i.FencingToken)
				mu.Unlock()
			})
		}()
		has := func(tok int64) func() bool {
			return func() bool {
				mu.Lock()
				defer mu.Unlock()
				for _, s := range seen {
					if s == tok {
						return true
					}
				}
				return false
			}
		}
		waitFor(t, 10*time.Second, "the observer's first read", has(0))
		var tokens []int64
		for i := range 3 {
			got := make(chan int64, 1)
			release := make(chan struct{})
			el := must(leader.New(b.Coordinator(t), leaseKey, fenceKey, "e",
				leader.WithLeaseDuration(time.Minute), // a term ends only by resigning
				leader.OnElected(func(ctx context.Context, term *leader.Term) error {
					got <- term.FencingToken()
					<-release
					return nil
				})))(t)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- el.Run(ctx) }()
			tok := <-got
			start := time.Now()
			waitFor(t, 10*time.Second, "the observer told of the new term", has(tok))
			t.Logf("term %d (token %d) seen %v after it began", i, tok, time.Since(start).Round(time.Millisecond))
			tokens = append(tokens, tok)
			close(release)
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
		if !(tokens[0] < tokens[1] && tokens[1] < tokens[2]) {
			t.Fatalf("tokens %v not increasing", tokens)
		}
		ostop()
		if err := <-odone; err != nil {
			t.Fatal(err)
		}
	})
}
