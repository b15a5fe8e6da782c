package ratelimit

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/testkit/testharness"
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
	kThrot   kind = "throttle"
	kLog     kind = "sliding log"
)

var kinds = []kind{kFixed, kSliding, kBucket, kGCRA, kConc}

// every is every algorithm, the composite included.
var every = []kind{kFixed, kSliding, kBucket, kGCRA, kComp, kConc}

// build returns a limiter of kind with capacity n and time scale d (window,
// period, interval; lease duration for concurrency).
func build(t testing.TB, coord *coordination.Coordinator, k kind, key string, n int, d time.Duration, opts ...Option) *tlim {
	t.Helper()
	var (
		l   *tlim
		err error
	)
	switch k {
	case kFixed:
		l, err = newT(coord, key, FixedWindow{Limit: n, Window: d}, opts...)
	case kSliding:
		l, err = newT(coord, key, SlidingWindow{Limit: n, Window: d, Segments: 4}, opts...)
	case kBucket:
		l, err = newT(coord, key, TokenBucket{Limit: n, TokensPerPeriod: 1, Period: d}, opts...)
	case kGCRA:
		l, err = newT(coord, key, GCRA{Burst: n, Interval: d}, opts...)
	case kThrot:
		l, err = newT(coord, key, Throttle{Limit: n, Quiet: d.Round(time.Millisecond)}, opts...)
	case kLog:
		l, err = newT(coord, key, SlidingLog{Limit: n, Window: d}, opts...)
	case kConc:
		l, err = newT(coord, key, Concurrency{Limit: n, LeaseDuration: max(d, minLeaseDuration)}, opts...)
	case kComp:
		// The bucket (capacity n) binds; the windows hold more.
		l, err = newT(coord, key, Composite{Components: []Settings{
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
func acquire(t testing.TB, l *tlim, permits int) Lease {
	t.Helper()
	le, err := l.Allow(context.Background(), permits)
	if err != nil {
		t.Fatalf("Allow(%d): %v", permits, err)
	}
	return le
}

// grantRefundable calls Allow as the middleware does for a policy a later one
// may refuse (its grant names its mark, for a refund) and fails the test
// on error.
func grantRefundable(t testing.TB, l *tlim, permits int) Lease {
	t.Helper()
	r, err := l.Limiter.allow(context.Background(), permits, refundable)
	if err != nil {
		t.Fatalf("Allow(%d): %v", permits, err)
	}
	return Lease{Decision: r.decision(), r: r}
}

// burst calls Allow(1) n times and returns how many were granted.
func burst(t testing.TB, l *tlim, n int) int {
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
func wantBurst(t testing.TB, l *tlim, offered, want int, when string) {
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

// Concurrency is the test suite's settings of a concurrency limiter:
// newT builds a [ConcurrencyLimiter] of them (LeaseDuration 0: the
// default).
type Concurrency struct {
	Limit         int
	LeaseDuration time.Duration
}

func (c Concurrency) spec() (*spec, error) {
	return concurrency{limit: c.Limit, lease: c.LeaseDuration}.spec()
}

// tlim is a limiter under test: a consumptive *Limiter, or a
// ConcurrencyLimiter (with its inner limiter embedded, for the tests'
// looks inside), both answering with a test Lease.
type tlim struct {
	*Limiter
	conc *ConcurrencyLimiter
}

// newT is New, or NewConcurrency for Concurrency settings.
func newT(coord *coordination.Coordinator, key string, s Settings, opts ...Option) (*tlim, error) {
	var c *Concurrency
	switch v := s.(type) {
	case Concurrency:
		c = &v
	case *Concurrency:
		c = v
	}
	if c != nil {
		if c.LeaseDuration != 0 {
			opts = append([]Option{WithLeaseDuration(c.LeaseDuration)}, opts...)
		}
		cl, err := NewConcurrency(coord, key, c.Limit, opts...)
		if err != nil {
			return nil, err
		}
		return &tlim{Limiter: cl.l, conc: cl}, nil
	}
	l, err := New(coord, key, s, opts...)
	if err != nil {
		return nil, err
	}
	return &tlim{Limiter: l}, nil
}

// Lease is the tests' answer of any limiter: a Decision, a Reservation or
// a ConcurrencyLease (as the package's one Lease type was).
type Lease struct {
	Decision
	r  result // a consumptive Allow's (for refunds)
	rv *Reservation
	cl *ConcurrencyLease
}

func (l Lease) refund(ctx context.Context) (bool, error) { return l.r.refund(ctx) }

func (l Lease) Acquired() bool { return l.Allowed() }

func (l Lease) Release(ctx context.Context) error {
	if l.cl == nil {
		return nil
	}
	_, err := l.cl.Release(ctx)
	return err
}

func (l Lease) Context() context.Context {
	if l.cl == nil {
		return context.Background()
	}
	return l.cl.Context()
}

func (l Lease) Settle(ctx context.Context, actual int) (int, error) { return l.rv.Settle(ctx, actual) }

// concLease turns a concurrency limiter's answer into a Lease: a refusal
// (a *WaitError) is a refused Lease, as the old Allow returned.
func (t *tlim) concLease(cl *ConcurrencyLease, err error, try bool) (Lease, error) {
	var we *WaitError
	switch {
	case err == nil:
		return Lease{Decision: Decision{allowed: true, failedOpen: cl.FailedOpen(), available: t.conc.Statistics().AvailablePermits}, cl: cl}, nil
	case try && errors.As(err, &we):
		d := Decision{denied: we.Denied, available: t.conc.Statistics().AvailablePermits}
		if we.Denied || we.Err != nil {
			d.available = -1
		}
		return Lease{Decision: d}, nil
	}
	return Lease{}, err
}

func (t *tlim) Allow(ctx context.Context, permits int) (Lease, error) {
	if t.conc == nil {
		r, err := t.Limiter.allow(ctx, permits, 0) // Allow, keeping the result
		return Lease{Decision: r.decision(), r: r}, err
	}
	if permits == 0 { // a probe: the internal path (the public verbs take at least 1)
		r, err := t.Limiter.allow(ctx, 0, 0)
		return Lease{Decision: r.decision()}, err
	}
	cl, err := t.conc.TryAcquire(ctx, permits)
	return t.concLease(cl, err, true)
}

func (t *tlim) Wait(ctx context.Context, permits int) (Lease, error) {
	if t.conc == nil {
		d, err := t.Limiter.Wait(ctx, permits)
		return Lease{Decision: d}, err
	}
	cl, err := t.conc.Acquire(ctx, permits)
	return t.concLease(cl, err, false)
}

func (t *tlim) Reserve(ctx context.Context, estimate int) (Lease, error) {
	rv, err := t.Limiter.Reserve(ctx, estimate)
	if rv == nil {
		return Lease{}, err
	}
	return Lease{Decision: rv.Decision, rv: rv}, err
}

func (t *tlim) Update(ctx context.Context, s Settings) error {
	if t.conc == nil {
		return t.Limiter.Update(ctx, s)
	}
	switch c := s.(type) {
	case Concurrency:
		if d := c.LeaseDuration; d != 0 && d != time.Duration(t.spec().leaseMs)*time.Millisecond {
			return t.Limiter.Update(ctx, concurrency{limit: c.Limit, lease: d})
		}
		return t.conc.Update(ctx, c.Limit)
	}
	return t.Limiter.Update(ctx, s)
}

func (t *tlim) Close() error {
	if t == nil {
		return nil
	}
	return t.Limiter.Close()
}

// lim and cc are a Policy's Limiter and Concurrency for t.
func (t *tlim) lim() *Limiter {
	if t == nil || t.conc != nil {
		return nil
	}
	return t.Limiter
}

func (t *tlim) cc() *ConcurrencyLimiter {
	if t == nil {
		return nil
	}
	return t.conc
}
