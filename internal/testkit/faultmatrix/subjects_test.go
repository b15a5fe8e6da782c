package faultmatrix_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/fencing"
	"github.com/coordkit/coordination/idempotency"
	"github.com/coordkit/coordination/internal/fencingcore"
	"github.com/coordkit/coordination/internal/lockcore"
	"github.com/coordkit/coordination/latch"
	"github.com/coordkit/coordination/leader"
	"github.com/coordkit/coordination/lock"
	"github.com/coordkit/coordination/ratelimit"
	"github.com/coordkit/coordination/redlock"
	"github.com/coordkit/coordination/rwlease"
	"github.com/coordkit/coordination/semaphore"
)

// kind says what an ambiguous take leaves behind.
type kind int

const (
	leaseKind    kind = iota + 1 // a held lease: an ambiguous take is undone in the background
	consumeKind                  // a decision or count-down: an ambiguous take may have counted
	electionKind                 // leader election: Run ends, the lease it may have taken is undone
	quorumKind                   // Redlock: the faults hit one node of three
)

// subject is one primitive in the matrix, on the object "m".
type subject struct {
	name  string
	kind  kind
	nodes int  // servers (0: 1)
	once  bool // a consumptive decision sent at most once (never re-sent once written)
	hft   bool // needs hash-field expiration (Redis 7.4+, Valkey 9+)
	key   string
	keys  []string // every key of the object
	setup func(ctx context.Context, w *world) error
	// take is the primitive's state-changing operation; it returns a
	// description of the answer, equal to want for a fresh object.
	take func(ctx context.Context, w *world) (string, error)
	want string
	// count is how many of take's effects the servers hold, read straight
	// from them; full is the count after a clean take (0: 1).
	count func(ctx context.Context, w *world) (int, error)
	full  int
	// oomGranted: under maxmemory with noeviction the take still succeeds
	// (its script's first write is one that frees memory, after which the
	// server lets the script finish); otherwise it fails with OOM.
	oomGranted bool
	// forgotten asserts what the primitive does once the keys in lost are
	// gone (a restart: all of them; eviction: those with a TTL).
	forgotten func(t *testing.T, w *world, lost map[string]bool)
	// restart and evict describe forgotten's effect for docs/faults.md.
	restart, evict string
}

func (s subject) fullCount() int { return max(s.full, 1) }

func (s subject) nodeCount() int { return max(s.nodes, 1) }

var bg = context.Background()

// heldLock counts the lock at key: 1 when it holds an owner token; the
// tombstone an abandoned acquisition's cleanup leaves (lockcore) holds
// nothing: it counts 0.
func heldLock(key string) func(ctx context.Context, w *world) (int, error) {
	return func(ctx context.Context, w *world) (int, error) { return heldLockOn(ctx, w.admin[0], key) }
}

// heldLockOn is heldLock on the server of c.
func heldLockOn(ctx context.Context, c redis.UniversalClient, key string) (int, error) {
	v, err := c.Get(ctx, key).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return 0, nil
	case err != nil:
		return 0, err
	case lockcore.IsTombstone(v):
		return 0, nil
	}
	return 1, nil
}

// heldFencing counts the fencing lease at key: 1 when its hash names an
// owner; the tombstone an abandoned acquisition's cleanup leaves (owner
// token!) holds nothing: it counts 0.
func heldFencing(key string) func(ctx context.Context, w *world) (int, error) {
	return func(ctx context.Context, w *world) (int, error) {
		v, err := w.admin[0].HGet(ctx, key, "owner").Result()
		switch {
		case errors.Is(err, redis.Nil):
			return 0, nil
		case err != nil:
			return 0, err
		case lockcore.IsTombstone(v):
			return 0, nil
		}
		return 1, nil
	}
}

// heldRW counts the read-write lease holders at key: its members scored
// above 0 (a lease's expiry); waiting records and the tombstones an
// abandoned acquisition's cleanup leaves score below 0 and hold nothing.
func heldRW(key string) func(ctx context.Context, w *world) (int, error) {
	return func(ctx context.Context, w *world) (int, error) {
		n, err := w.admin[0].ZCount(ctx, key, "(0", "+inf").Result()
		return int(n), err
	}
}

// liveClaim counts the idempotency claim at key: pending or completed. An
// abandoned claim's marker ("A<fence>:<id>", kept 5 s so that a re-sent
// Abandon reports its first outcome) leaves the key free: it counts 0.
func liveClaim(key string) func(ctx context.Context, w *world) (int, error) {
	return func(ctx context.Context, w *world) (int, error) {
		v, err := w.admin[0].Get(ctx, key).Result()
		switch {
		case errors.Is(err, redis.Nil):
			return 0, nil
		case err != nil:
			return 0, err
		case strings.HasPrefix(v, "A"):
			return 0, nil
		}
		return 1, nil
	}
}

// leaseForgotten checks a lease-like primitive after its state was lost or
// kept: the holder's Verify, and whether a second holder gets in.
func leaseForgotten(t *testing.T, lost bool, verify func() (bool, error), second func() error) {
	t.Helper()
	ok, err := verify()
	if err != nil || ok == lost {
		t.Errorf("holder's Verify = %v, %v; want %v", ok, err, !lost)
	}
	err = second()
	switch {
	case lost && err != nil:
		t.Errorf("second holder after the state was lost: %v, want it acquired", err)
	case !lost && !errors.Is(err, coordination.ErrNotAcquired):
		t.Errorf("second holder while the state was kept: %v, want ErrNotAcquired", err)
	}
}

func limiterSubject(name string, mk func(c *coordination.Coordinator) (*ratelimit.Limiter, error)) subject {
	limiter := func(t testing.TB, c *coordination.Coordinator) *ratelimit.Limiter {
		l := must(mk(c))(t)
		t.Cleanup(func() { _ = l.Close() })
		return l
	}
	return subject{
		name: name, kind: consumeKind, once: true, key: "m", keys: []string{"m"},
		take: func(ctx context.Context, w *world) (string, error) {
			l, err := limiter(w.t, w.coord[0]).Allow(ctx, 1)
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("granted %v, %d left", l.Allowed(), l.Available()), nil
		},
		want: "granted true, 4 left",
		count: func(ctx context.Context, w *world) (int, error) {
			l, err := limiter(w.t, w.direct[0]).Allow(ctx, 0)
			return 5 - int(l.Available()), err
		},
		forgotten: func(t *testing.T, w *world, lost map[string]bool) {
			l := must(limiter(t, w.direct[0]).Allow(bg, 0))(t)
			if want := map[bool]int64{true: 5, false: 4}[lost["m"]]; l.Available() != want {
				t.Errorf("available after the fault: %d, want %d", l.Available(), want)
			}
		},
		restart: "budget forgotten: full again", evict: "budget evicted: full again",
	}
}

var hour = time.Hour

func subjects() []subject {
	return []subject{
		{
			name: "lock", kind: leaseKind, key: "m", keys: []string{"m"},
			take: func(ctx context.Context, w *world) (string, error) {
				l, err := lockTryAcquire(ctx, w.coord[0], "m", time.Minute)
				w.held = l
				return "held", err
			},
			want: "held", count: heldLock("m"),
			forgotten: func(t *testing.T, w *world, lost map[string]bool) {
				leaseForgotten(t, lost["m"], func() (bool, error) { return w.held.(*lock.Lock).Verify(bg) },
					func() error { _, err := lockTryAcquire(bg, w.direct[0], "m", time.Minute); return err })
			},
			restart: "forgotten: holder's Verify false, a second holder", evict: "evicted: holder's Verify false, a second holder",
		},
		{
			name: "fencing", kind: leaseKind, key: "{m}:lease", keys: []string{"{m}:lease", mFences},
			take: func(ctx context.Context, w *world) (string, error) {
				m, err := fencing.New(w.coord[0], "{m}:lease", "{m}:fence")
				if err != nil {
					return "", err
				}
				l, err := m.TryAcquire(ctx, time.Minute)
				if err != nil {
					return "", err
				}
				w.held = l
				return fmt.Sprintf("token %d", l.FencingToken()), nil
			},
			want: "token 1", count: heldFencing("{m}:lease"),
			forgotten: func(t *testing.T, w *world, lost map[string]bool) {
				l := w.held.(*fencing.Lock)
				if ok, err := l.Verify(bg); ok || err != nil {
					t.Errorf("holder's Verify = %v, %v; want false", ok, err)
				}
				// A second holder, through the coordinator that saw token 1.
				next := must(must(fencing.New(w.coord[0], "{m}:lease", "{m}:fence"))(t).TryAcquire(bg, time.Minute))(t)
				want, resets := l.FencingToken()+1, int64(0)
				if lost[mFences] {
					// The counter restarted: token 1 is handed out again,
					// and the coordinator that saw it says so.
					want, resets = 1, 1
				}
				if next.FencingToken() != want {
					t.Errorf("second holder's token %d, want %d", next.FencingToken(), want)
				}
				if n := w.counted("coordination.fencing.counter_resets"); n != resets {
					t.Errorf("counter_resets = %d, want %d", n, resets)
				}
			},
			restart: "forgotten: a second holder; token 1 again, counted in counter_resets",
			evict:   "lease evicted, counter kept: a second holder, token 2",
		},
		{
			name: "field lease", kind: leaseKind, hft: true, key: "m", keys: []string{"m"},
			take: func(ctx context.Context, w *world) (string, error) {
				l, err := lockTryAcquireField(ctx, w.coord[0], "m", "f", time.Minute)
				w.held = l
				return "held", err
			},
			want: "held",
			count: func(ctx context.Context, w *world) (int, error) {
				// The tombstone an abandoned acquisition's cleanup leaves
				// in the field holds nothing: it counts 0.
				v, err := w.admin[0].HGet(ctx, "m", "f").Result()
				if errors.Is(err, redis.Nil) || err == nil && lockcore.IsTombstone(v) {
					return 0, nil
				}
				return 1, err
			},
			forgotten: func(t *testing.T, w *world, lost map[string]bool) {
				leaseForgotten(t, lost["m"], func() (bool, error) { return w.held.(*lock.FieldLease).Verify(bg) },
					func() error { _, err := lockTryAcquireField(bg, w.direct[0], "m", "f", time.Minute); return err })
			},
			restart: "forgotten: holder's Verify false, a second holder", evict: "kept (field TTLs do not make the key volatile)",
		},
		{
			name: "rwlease", kind: leaseKind, key: "m", keys: []string{"m"}, oomGranted: true,
			take: func(ctx context.Context, w *world) (string, error) {
				m, err := rwlease.New(w.coord[0], "m")
				if err != nil {
					return "", err
				}
				l, err := m.TryWrite(ctx, time.Minute)
				w.held = l
				return "held", err
			},
			want: "held", count: heldRW("m"),
			forgotten: func(t *testing.T, w *world, lost map[string]bool) {
				leaseForgotten(t, lost["m"], func() (bool, error) { return w.held.(*rwlease.Lease).Verify(bg) },
					func() error {
						m, err := rwlease.New(w.direct[0], "m")
						if err != nil {
							return err
						}
						_, err = m.TryWrite(bg, time.Minute)
						return err
					})
			},
			restart: "forgotten: holder's Verify false, a second writer", evict: "evicted: holder's Verify false, a second writer",
		},
		{
			name: "semaphore", kind: leaseKind, key: "m", keys: []string{"m"},
			take: func(ctx context.Context, w *world) (string, error) {
				p, err := must(semaphore.New(w.coord[0], "m", 1))(w.t).TryAcquire(ctx, time.Minute)
				w.held = p
				return "held", err
			},
			want: "held",
			count: func(ctx context.Context, w *world) (int, error) {
				st, err := must(semaphore.New(w.direct[0], "m", 1))(w.t).State(ctx)
				return int(st.Used), err
			},
			forgotten: func(t *testing.T, w *world, lost map[string]bool) {
				leaseForgotten(t, lost["m"], func() (bool, error) { return w.held.(*semaphore.Permit).Verify(bg) },
					func() error {
						_, err := must(semaphore.New(w.direct[0], "m", 1))(t).TryAcquire(bg, time.Minute)
						return err
					})
			},
			restart: "forgotten: permit's Verify false, capacity exceeded", evict: "evicted: permit's Verify false, capacity exceeded",
		},
		{
			name: "latch", kind: consumeKind, key: "m", keys: []string{"m"},
			setup: func(ctx context.Context, w *world) error {
				lt, err := latch.New(w.coord[0], "m")
				if err != nil {
					return err
				}
				g, err := lt.Create(ctx, 3)
				w.held = g
				return err
			},
			take: func(ctx context.Context, w *world) (string, error) {
				n, err := w.held.(*latch.Generation).CountDown(ctx)
				return fmt.Sprintf("count %d", n), err
			},
			want: "count 2",
			count: func(ctx context.Context, w *world) (int, error) {
				lt, err := latch.New(w.direct[0], "m")
				if err != nil {
					return 0, err
				}
				l, err := lt.Join(ctx)
				if err != nil {
					return 0, err
				}
				n, err := l.Count(ctx)
				return 3 - int(n), err
			},
			forgotten: func(t *testing.T, w *world, lost map[string]bool) {
				n, err := w.held.(*latch.Generation).CountDown(bg)
				switch {
				case lost["m"] && !errors.Is(err, latch.ErrNotFound):
					t.Errorf("count-down after the latch was lost: %d, %v; want ErrNotFound", n, err)
				case !lost["m"] && (err != nil || n != 1):
					t.Errorf("count-down of the kept latch: %d, %v; want 1", n, err)
				}
			},
			restart: "forgotten: count-downs fail with ErrNotFound", evict: "kept (no TTL unless WithKeyTTL)",
		},
		{
			name: "leader", kind: electionKind, key: "{m}:lease", keys: []string{"{m}:lease", mFences},
			take: func(ctx context.Context, w *world) (string, error) {
				terms := make(chan *leader.Term, 8)
				el := must(leader.New(w.coord[0], "{m}:lease", "{m}:fence", "a", leader.WithLeaseDuration(time.Second),
					leader.WithRetryDelay(50*time.Millisecond),
					leader.OnElected(func(ctx context.Context, term *leader.Term) error {
						terms <- term
						<-ctx.Done()
						return nil
					})))(w.t)
				ended := make(chan error, 1)
				runCtx, cancel := context.WithCancel(ctx)
				go func() { ended <- el.Run(runCtx) }()
				w.t.Cleanup(func() { cancel(); <-ended })
				select {
				case term := <-terms:
					w.held = terms
					return fmt.Sprintf("token %d", term.FencingToken()), nil
				case err := <-ended:
					ended <- err
					if err == nil {
						err = ctx.Err()
					}
					return "", err
				}
			},
			want: "token 1",
			count: func(ctx context.Context, w *world) (int, error) {
				info, err := leader.Get(ctx, w.direct[0], "{m}:lease")
				if errors.Is(err, leader.ErrNoLeader) {
					return 0, nil
				}
				return map[bool]int{true: 1}[info.FencingToken > 0], err
			},
			forgotten: func(t *testing.T, w *world, lost map[string]bool) {
				terms := w.held.(chan *leader.Term)
				want := int64(2) // the counter was kept
				if lost[mFences] {
					want = 1
				}
				select {
				case term := <-terms:
					if term.FencingToken() != want {
						t.Errorf("re-elected with token %d, want %d", term.FencingToken(), want)
					}
				case <-time.After(10 * time.Second):
					t.Fatal("the elector was not re-elected within 10 s")
				}
				if n, resets := w.counted("coordination.fencing.counter_resets"), map[bool]int64{true: 1}[want == 1]; n != resets {
					t.Errorf("counter_resets = %d, want %d", n, resets)
				}
			},
			restart: "term revoked; re-elected with token 1 again, counted in counter_resets",
			evict:   "term revoked; re-elected, counter kept (token 2)",
		},
		{
			name: "idempotency", kind: leaseKind, key: "m", keys: []string{"m"},
			take: func(ctx context.Context, w *world) (string, error) {
				c, err := must(idempotency.New(w.coord[0]))(w.t).Begin(ctx, "m", time.Minute)
				w.held = c
				return c.State.String(), err
			},
			want: idempotency.Started.String(), count: liveClaim("m"),
			forgotten: func(t *testing.T, w *world, lost map[string]bool) {
				c := must(must(idempotency.New(w.direct[0]))(t).Begin(bg, "m", time.Minute))(t)
				want := map[bool]idempotency.State{true: idempotency.Started, false: idempotency.InProgress}[lost["m"]]
				if c.State != want {
					t.Errorf("a second Begin: %v, want %v", c.State, want)
				}
			},
			restart: "forgotten: the work runs again (Started)", evict: "evicted: the work runs again (Started)",
		},
		limiterSubject("fixed window", func(c *coordination.Coordinator) (*ratelimit.Limiter, error) {
			return ratelimit.New(c, "m", ratelimit.FixedWindow{Limit: 5, Window: hour})
		}),
		limiterSubject("sliding window", func(c *coordination.Coordinator) (*ratelimit.Limiter, error) {
			return ratelimit.New(c, "m", ratelimit.SlidingWindow{Limit: 5, Window: hour, Segments: 4})
		}),
		limiterSubject("token bucket", func(c *coordination.Coordinator) (*ratelimit.Limiter, error) {
			return ratelimit.New(c, "m", ratelimit.TokenBucket{Limit: 5, TokensPerPeriod: 1, Period: hour})
		}),
		limiterSubject("GCRA", func(c *coordination.Coordinator) (*ratelimit.Limiter, error) {
			return ratelimit.New(c, "m", ratelimit.GCRA{Burst: 5, Interval: hour})
		}),
		limiterSubject("composite", func(c *coordination.Coordinator) (*ratelimit.Limiter, error) {
			return ratelimit.New(c, "m", ratelimit.Composite{Components: []ratelimit.Settings{
				ratelimit.FixedWindow{Limit: 5, Window: hour}, ratelimit.GCRA{Burst: 5, Interval: hour}}})
		}),
		concurrencySubject(),
		{
			name: "redlock", kind: quorumKind, nodes: 3, full: 3, key: "m", keys: []string{"m"},
			take: func(ctx context.Context, w *world) (string, error) {
				g := must(redlock.New(w.coord))(w.t)
				l, err := g.TryAcquire(ctx, "m", time.Minute)
				w.held = l
				return fmt.Sprintf("quorum %d of %d", g.Quorum(), g.Size()), err
			},
			want: "quorum 2 of 3",
			count: func(ctx context.Context, w *world) (int, error) {
				n := 0
				for i := range w.admin {
					c, err := heldLockOn(ctx, w.admin[i], "m")
					if err != nil {
						return 0, err
					}
					n += c
				}
				return n, nil
			},
			forgotten: func(t *testing.T, w *world, lost map[string]bool) {
				if ok, err := w.held.(*redlock.Lock).Refresh(bg, time.Minute); !ok || err != nil {
					t.Errorf("holder's Refresh = %v, %v; want true (a quorum still holds it)", ok, err)
				}
				g := must(redlock.New(w.direct))(t)
				if _, err := g.TryAcquire(bg, "m", time.Minute); !errors.Is(err, coordination.ErrNotAcquired) {
					t.Errorf("a second group: %v, want ErrNotAcquired", err)
				}
			},
			restart: "one node of 3 forgotten: the quorum holds, no second holder",
			evict:   "one node of 3 evicted: the quorum holds, no second holder",
		},
	}
}

func concurrencySubject() subject {
	limiter := func(t testing.TB, c *coordination.Coordinator) *ratelimit.ConcurrencyLimiter {
		l := must(ratelimit.NewConcurrency(c, "m", 5, ratelimit.WithLeaseDuration(time.Minute)))(t)
		t.Cleanup(func() { _ = l.Close() })
		return l
	}
	s := subject{
		name: "concurrency", key: "m", keys: []string{"m"},
		take: func(ctx context.Context, w *world) (string, error) {
			lim := limiter(w.t, w.coord[0])
			if _, err := lim.TryAcquire(ctx, 1); err != nil {
				return "", err
			}
			return fmt.Sprintf("granted true, %d left", lim.Statistics().AvailablePermits), nil
		},
		want: "granted true, 4 left",
		// The permits held: a probe lease of 1 on a direct connection
		// (released at once) learns the permits free.
		count: func(ctx context.Context, w *world) (int, error) {
			lim := limiter(w.t, w.direct[0])
			l, err := lim.TryAcquire(ctx, 1)
			if errors.Is(err, coordination.ErrNotAcquired) {
				return 5, nil
			}
			if err != nil {
				return 0, err
			}
			free := int(lim.Statistics().AvailablePermits) + 1
			if _, err := l.Release(ctx); err != nil {
				return 0, err
			}
			return 5 - free, nil
		},
	}
	s.forgotten = func(t *testing.T, w *world, lost map[string]bool) {
		used := must(s.count(bg, w))(t)
		if want := map[bool]int{true: 0, false: 1}[lost["m"]]; used != want {
			t.Errorf("permits held after the fault: %d, want %d", used, want)
		}
	}
	s.kind, s.oomGranted = leaseKind, true
	s.restart, s.evict = "leases forgotten: all 5 free again", "leases evicted: all 5 free again"
	return s
}

// lockTryAcquire is lock.New(coord, key) then TryAcquire(ctx, ttl).
func lockTryAcquire(ctx context.Context, coord *coordination.Coordinator, key string, ttl time.Duration) (*lock.Lock, error) {
	m, err := lock.New(coord, key)
	if err != nil {
		return nil, err
	}
	return m.TryAcquire(ctx, ttl)
}

// lockTryAcquireField is lock.NewFieldSet(coord, key) then TryAcquire(ctx,
// field, ttl).
func lockTryAcquireField(ctx context.Context, coord *coordination.Coordinator, key, field string, ttl time.Duration) (*lock.FieldLease, error) {
	s, err := lock.NewFieldSet(coord, key)
	if err != nil {
		return nil, err
	}
	return s.TryAcquire(ctx, field, ttl)
}

// mFences is the shared counter hash that holds the counter of the fenced
// name "{m}:fence" (without the key prefix, which the matrix's prefixes do
// not tag): the key an eviction or a restart must lose for its tokens to
// start again.
var mFences = fencingcore.SharedKeyOf("", "{m}:fence")
