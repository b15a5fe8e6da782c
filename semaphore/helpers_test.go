package semaphore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/semaphore"
)

const key = "permits"

// newSem returns a semaphore on the test's key through coord.
func newSem(t testing.TB, coord *coordination.Coordinator, capacity int64, opts ...semaphore.Option) *semaphore.Semaphore {
	t.Helper()
	s, err := semaphore.New(coord, key, capacity, opts...)
	if err != nil {
		t.Fatalf("semaphore.New(%d): %v", capacity, err)
	}
	return s
}

// mustAcquireN takes n permits or fails the test.
func mustAcquireN(t testing.TB, s *semaphore.Semaphore, n int64, ttl time.Duration) *semaphore.Permit {
	t.Helper()
	p, err := s.TryAcquireN(context.Background(), n, ttl)
	if err != nil {
		t.Fatalf("TryAcquireN(%d, %v): %v", n, ttl, err)
	}
	return p
}

// release releases p or fails the test, returning the outcome.
func release(t testing.TB, p *semaphore.Permit) coordination.ReleaseOutcome {
	t.Helper()
	out, err := p.Release(context.Background())
	if err != nil {
		t.Fatalf("Release: %v", err)
	}
	return out
}

// wantNotAcquired fails the test unless err is contention.
func wantNotAcquired(t testing.TB, p *semaphore.Permit, err error) {
	t.Helper()
	if !errors.Is(err, coordination.ErrNotAcquired) || p != nil {
		t.Fatalf("got permit %v, err %v; want coordination.ErrNotAcquired", p, err)
	}
}

// snapshot is the raw content of the semaphore key: members with scores,
// and the key's absolute expiry time (PEXPIRETIME).
func snapshot(t testing.TB, b *testharness.Backend, raw redis.UniversalClient) string {
	t.Helper()
	ctx := context.Background()
	zs, err := raw.ZRangeWithScores(ctx, b.Key(key), 0, -1).Result()
	if err != nil {
		t.Fatalf("ZRANGE: %v", err)
	}
	var parts []string
	for _, z := range zs {
		parts = append(parts, fmt.Sprintf("%v=%v", z.Member, z.Score))
	}
	at, err := raw.PExpireTime(ctx, b.Key(key)).Result()
	if err != nil {
		t.Fatalf("PEXPIRETIME: %v", err)
	}
	return fmt.Sprintf("%s expires=%v", strings.Join(parts, ","), at)
}

// members returns the permit members of the raw key (without the records
// "capacity", "extra" and "waiting").
func members(t testing.TB, b *testharness.Backend, raw redis.UniversalClient) []string {
	t.Helper()
	ms, err := raw.ZRange(context.Background(), b.Key(key), 0, -1).Result()
	if err != nil {
		t.Fatalf("ZRANGE: %v", err)
	}
	return slices.DeleteFunc(ms, func(m string) bool { return !strings.HasPrefix(m, "P:") })
}

// memberOf is the documented member name of a permit.
func memberOf(p *semaphore.Permit) string { return fmt.Sprintf("P:%d:%s", p.N(), p.Token()) }

// meterProvider records Int64Counter additions by name and attributes.
type meterProvider struct {
	noop.MeterProvider
	m *meter
}

func newMeterProvider() *meterProvider { return &meterProvider{m: &meter{counts: map[string]int64{}}} }

func (p *meterProvider) Meter(string, ...metric.MeterOption) metric.Meter { return p.m }

// count returns the total added to counter name with exactly the given
// attributes ("k=v" pairs, sorted).
func (p *meterProvider) count(name string, attrs ...string) int64 {
	p.m.mu.Lock()
	defer p.m.mu.Unlock()
	slices.Sort(attrs)
	return p.m.counts[name+"{"+strings.Join(attrs, ",")+"}"]
}

type meter struct {
	noop.Meter
	mu     sync.Mutex
	counts map[string]int64
}

func (m *meter) Int64Counter(name string, _ ...metric.Int64CounterOption) (metric.Int64Counter, error) {
	return counter{m: m, name: name}, nil
}

type counter struct {
	noop.Int64Counter
	m    *meter
	name string
}

func (c counter) Add(_ context.Context, v int64, opts ...metric.AddOption) {
	set := metric.NewAddConfig(opts).Attributes()
	var kv []string
	for _, a := range set.ToSlice() {
		kv = append(kv, string(a.Key)+"="+a.Value.Emit())
	}
	slices.Sort(kv)
	c.m.mu.Lock()
	c.m.counts[c.name+"{"+strings.Join(kv, ",")+"}"] += v
	c.m.mu.Unlock()
}

// eventually polls cond every 10 ms until it holds or limit passes.
func eventually(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, limit)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
