package ratelimit

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/testharness"
)

func TestMain(m *testing.M) { testharness.Main(m) }

// kind names an algorithm in table tests.
type kind string

const (
	kFixed   kind = "fixed"
	kSliding kind = "sliding"
	kBucket  kind = "bucket"
	kGCRA    kind = "gcra"
	kConc    kind = "concurrency"
	kComp    kind = "composite"
)

var kinds = []kind{kFixed, kSliding, kBucket, kGCRA, kConc}

// every is every algorithm, the composite included.
var every = []kind{kFixed, kSliding, kBucket, kGCRA, kComp, kConc}

// build returns a limiter of kind with capacity n and time scale d (window,
// period, interval; lease duration for concurrency).
func build(t testing.TB, coord *coordination.Coordinator, k kind, key string, n int, d time.Duration, opts ...Option) *Limiter {
	t.Helper()
	var (
		l   *Limiter
		err error
	)
	switch k {
	case kFixed:
		l, err = New(coord, key, FixedWindow{Limit: n, Window: d}, opts...)
	case kSliding:
		l, err = New(coord, key, SlidingWindow{Limit: n, Window: d, Segments: 4}, opts...)
	case kBucket:
		l, err = New(coord, key, TokenBucket{Limit: n, TokensPerPeriod: 1, Period: d}, opts...)
	case kGCRA:
		l, err = New(coord, key, GCRA{Burst: n, Interval: d}, opts...)
	case kConc:
		l, err = New(coord, key, Concurrency{Limit: n, LeaseDuration: max(d, minLeaseDuration)}, opts...)
	case kComp:
		// The bucket (capacity n) binds; the windows hold more.
		l, err = New(coord, key, Composite{Components: []Settings{
			TokenBucket{Limit: n, TokensPerPeriod: 1, Period: d},
			SlidingWindow{Limit: 2 * n, Window: d, Segments: 4},
			FixedWindow{Limit: 3 * n, Window: d.Round(time.Millisecond)},
		}}, opts...)
	}
	if err != nil {
		t.Fatalf("new %s: %v", k, err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// acquire calls Allow and fails the test on error.
func acquire(t testing.TB, l *Limiter, permits int) Lease {
	t.Helper()
	le, err := l.Allow(context.Background(), permits)
	if err != nil {
		t.Fatalf("Allow(%d): %v", permits, err)
	}
	return le
}

// burst calls Allow(1) n times and returns how many were granted.
func burst(t testing.TB, l *Limiter, n int) int {
	t.Helper()
	got := 0
	for range n {
		if acquire(t, l, 1).Acquired() {
			got++
		}
	}
	return got
}

// wantBurst checks that Allow(1) offered times grants exactly want.
func wantBurst(t testing.TB, l *Limiter, offered, want int, when string) {
	t.Helper()
	if got := burst(t, l, offered); got != want {
		t.Fatalf("%s: admitted %d of %d, want %d", when, got, offered, want)
	}
}

// wantRetry checks that a lease is refused with 0 < RetryAfter <= max, and
// exactly equal to exact on miniredis when exact > 0.
func wantRetry(t testing.TB, b *testharness.Backend, le Lease, exact, hi time.Duration) time.Duration {
	t.Helper()
	if le.Acquired() {
		t.Fatalf("lease acquired; want refused with RetryAfter")
	}
	ra, ok := le.RetryAfter()
	if !ok {
		t.Fatalf("refused lease has no RetryAfter")
	}
	if ra <= 0 || ra > hi {
		t.Fatalf("RetryAfter = %v, want in (0, %v]", ra, hi)
	}
	if b.IsMini() && exact > 0 && ra != exact {
		t.Fatalf("RetryAfter = %v, want exactly %v", ra, exact)
	}
	return ra
}

// clock keeps miniredis' TIME moving with the wall clock while a test waits
// on real timers (queues, renewals). On real servers it does nothing. Stop
// it before the test ends.
func clock(b *testharness.Backend) (stop func()) {
	if !b.IsMini() {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		last := time.Now()
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				b.Advance(now.Sub(last))
				last = now
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done); wg.Wait() }) }
}

func isErr(err, target error) bool { return errors.Is(err, target) }

// withClient returns a coordinator over client with the test's prefix.
func withClient(t testing.TB, b *testharness.Backend, client redis.UniversalClient) *coordination.Coordinator {
	t.Helper()
	coord, err := coordination.New(client, coordination.WithKeyPrefix(b.Prefix()))
	if err != nil {
		t.Fatal(err)
	}
	return coord
}
