package history

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/anishathalye/porcupine"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/fencing"
	"github.com/coordkit/coordination/idempotency"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/internal/timing"
	"github.com/coordkit/coordination/latch"
	"github.com/coordkit/coordination/lock"
	"github.com/coordkit/coordination/ratelimit"
	"github.com/coordkit/coordination/rwlease"
	"github.com/coordkit/coordination/semaphore"
	"github.com/coordkit/coordination/tests/lincheck"
)

// workloads returns every primitive's workload.
func workloads() []workload {
	ws := []workload{
		leaseWorkload("lock", 3, lincheck.LeaseRules{Capacity: 1}, func(w *hctx, ctx context.Context, a lincheck.Acquire) (handle, error) {
			m, err := lock.New(w.coord, w.key)
			if err != nil {
				return nil, err
			}
			return m.TryAcquire(ctx, a.TTL)
		}),
		// Hash field expiry: Redis 7.4+ and Valkey 9.0+ only.
		needs((*testharness.Backend).HasHashFieldTTL, leaseWorkload("field", 3, lincheck.LeaseRules{Capacity: 1},
			func(w *hctx, ctx context.Context, a lincheck.Acquire) (handle, error) {
				s, err := lock.NewFieldSet(w.coord, w.key)
				if err != nil {
					return nil, err
				}
				return s.TryAcquire(ctx, "job", a.TTL)
			})),
		leaseWorkload("semaphore", 4, lincheck.LeaseRules{Capacity: 3}, func(w *hctx, ctx context.Context, a lincheck.Acquire) (handle, error) {
			s, err := semaphore.New(w.coord, w.key, 3)
			if err != nil {
				return nil, err
			}
			return s.TryAcquireN(ctx, a.N, a.TTL)
		}),
		leaseWorkload("rwlease", 4, lincheck.LeaseRules{RW: true}, func(w *hctx, ctx context.Context, a lincheck.Acquire) (handle, error) {
			rw, err := rwlease.New(w.coord, w.key)
			if err != nil {
				return nil, err
			}
			if a.Write {
				return rw.TryWrite(ctx, a.TTL)
			}
			return rw.TryRead(ctx, a.TTL)
		}),
		fencedWorkload(),
		latchWorkload(),
		idempotencyWorkload(),
		concurrencyWorkload(),
		denyWorkload(),
	}
	for _, l := range []struct {
		name string
		cfg  []ratelimit.Settings
		alg  []any
	}{
		{"fixed", []ratelimit.Settings{ratelimit.FixedWindow{Limit: 4, Window: 200 * time.Millisecond}},
			[]any{lincheck.Fixed{Limit: 4, Window: 200 * time.Millisecond}}},
		{"sliding", []ratelimit.Settings{ratelimit.SlidingWindow{Limit: 3, Window: 120 * time.Millisecond, Segments: 4}},
			[]any{lincheck.Sliding{Limit: 3, Window: 120 * time.Millisecond, Segments: 4}}},
		{"bucket", []ratelimit.Settings{ratelimit.TokenBucket{Limit: 3, TokensPerPeriod: 1, Period: 40 * time.Millisecond}},
			[]any{lincheck.Bucket{Limit: 3, PerPeriod: 1, Period: 40 * time.Millisecond}}},
		{"gcra", []ratelimit.Settings{ratelimit.GCRA{Burst: 3, Interval: 40 * time.Millisecond}},
			[]any{lincheck.GCRA{Burst: 3, Interval: 40 * time.Millisecond}}},
		{"composite", []ratelimit.Settings{
			ratelimit.FixedWindow{Limit: 5, Window: 200 * time.Millisecond},
			ratelimit.TokenBucket{Limit: 3, TokensPerPeriod: 1, Period: 30 * time.Millisecond},
			ratelimit.SlidingWindow{Limit: 6, Window: 200 * time.Millisecond, Segments: 4},
		}, []any{
			lincheck.Fixed{Limit: 5, Window: 200 * time.Millisecond},
			lincheck.Bucket{Limit: 3, PerPeriod: 1, Period: 30 * time.Millisecond},
			lincheck.Sliding{Limit: 6, Window: 200 * time.Millisecond, Segments: 4},
		}},
	} {
		ws = append(ws, rateWorkload(l.name, l.cfg, l.alg))
	}
	return ws
}

// needs returns w run only on the backends for which has is true.
func needs(has func(*testharness.Backend) bool, w workload) workload {
	w.needs = has
	return w
}

// handle is a held lease of any lease-shaped primitive.
type handle interface {
	Refresh(ctx context.Context, ttl time.Duration) (bool, error)
	Verify(ctx context.Context) (bool, error)
	Release(ctx context.Context) (coordination.ReleaseOutcome, error)
	Remaining() time.Duration
}

// held is a lease a client holds (or held: it may have expired).
type held struct {
	h   handle
	id  string
	ttl time.Duration
	// sent is when the last successful acquire or refresh was called: the
	// handle's local deadline is at least sent + ttl - drift.
	sent time.Time
}

// maybeLocal says whether the handle's local deadline may pass before a
// call made now returns (it then answers false without asking Redis).
func (l *held) maybeLocal() bool {
	return !time.Now().Add(opTimeout + 10*time.Millisecond).Before(l.sent.Add(l.ttl - timing.Drift(l.ttl)))
}

// ttls are the lease TTLs the workloads use; the shortest bounds their
// calls' durations (see workload.longest).
var ttls = []time.Duration{200 * time.Millisecond, 300 * time.Millisecond, 400 * time.Millisecond}

// leaseOp runs one operation on a held lease: refresh, verify, release,
// or a stall past its TTL (the holder pauses; its lease expires). It
// returns false when the lease was released.
func (w *hctx) leaseOp(l *held) bool {
	ctx, cancel := w.op()
	defer cancel()
	switch k := w.rng.IntN(10); {
	case k < 3:
		ttl := pick(w.rng, ttls...)
		call := time.Now()
		ok, _ := lincheck.Do(w.h, w.c, lincheck.Refresh{ID: l.id, TTL: ttl, MaybeLocal: l.maybeLocal()}, func() (bool, error) {
			return l.h.Refresh(ctx, ttl)
		})
		if ok {
			l.ttl, l.sent = ttl, call
		}
	case k < 5:
		_, _ = lincheck.Do(w.h, w.c, lincheck.Verify{ID: l.id, MaybeLocal: l.maybeLocal()}, func() (bool, error) {
			return l.h.Verify(ctx)
		})
	case k < 8:
		_, _ = lincheck.Do(w.h, w.c, lincheck.Release{ID: l.id}, func() (coordination.ReleaseOutcome, error) {
			return l.h.Release(ctx)
		})
		return false
	default:
		time.Sleep(l.ttl + time.Duration(10+w.rng.IntN(40))*time.Millisecond)
	}
	return true
}

// release releases l (when not nil): a lease still held at the end of a
// client's part of the history.
func (w *hctx) release(l *held) {
	if l == nil {
		return
	}
	ctx, cancel := w.op()
	defer cancel()
	_, _ = lincheck.Do(w.h, w.c, lincheck.Release{ID: l.id}, func() (coordination.ReleaseOutcome, error) {
		return l.h.Release(ctx)
	})
}

// leaseWorkload is the workload of a lease-shaped primitive: each client
// acquires (one or two permits of a semaphore, a read or a write lease),
// then refreshes, verifies, stalls past the TTL and releases, with short
// pauses; a lease still held at the end is released.
func leaseWorkload(name string, clients int, rules lincheck.LeaseRules,
	acquire func(w *hctx, ctx context.Context, a lincheck.Acquire) (handle, error)) workload {
	return workload{
		name: name, clients: clients, longest: ttls[0],
		model: func() porcupine.Model { return lincheck.LeaseSpec(rules).Model() },
		run: func(w *hctx) {
			var l *held
			for range 8 {
				if l != nil {
					if !w.leaseOp(l) {
						l = nil
					}
				} else {
					ttl := pick(w.rng, ttls...)
					a := lincheck.Acquire{ID: w.id(), TTL: ttl}
					if rules.Capacity > 1 {
						a.N = pick(w.rng, int64(1), 1, 2)
					}
					a.Write = rules.RW && w.rng.IntN(3) == 0
					ctx, cancel := w.op()
					call := time.Now()
					var h handle
					_, _ = lincheck.Do(w.h, w.c, a, func() (bool, error) {
						var err error
						h, err = acquire(w, ctx, a)
						if errors.Is(err, coordination.ErrNotAcquired) {
							return false, nil
						}
						return err == nil, err
					})
					cancel()
					if h != nil && !isNil(h) {
						l = &held{h: h, id: a.ID, ttl: ttl, sent: call}
					}
				}
				w.pause(30 * time.Millisecond)
			}
			w.release(l)
		},
	}
}

// isNil reports whether h holds a nil pointer.
func isNil(h handle) bool {
	switch x := h.(type) {
	case *lock.Lock:
		return x == nil
	case *lock.FieldLease:
		return x == nil
	case *semaphore.Permit:
		return x == nil
	case *rwlease.Lease:
		return x == nil
	case *fencing.Lock:
		return x == nil
	}
	return false
}

// fencedWorkload: a fencing-token lock and a resource guarded by its
// tokens. Holders write their token to the resource (Guarded.Set), also
// after stalling past their TTL (a paused holder's late write), and read
// it (Guarded.Get).
func fencedWorkload() workload {
	return workload{
		name: "fencing", clients: 3, longest: ttls[0],
		model: func() porcupine.Model { return lincheck.FencedSpec().Model() },
		keys:  func(key string) []string { return []string{key + ":fence", key + ":res"} },
		run: func(w *hctx) {
			mu, err := fencing.New(w.coord, w.key+":lease", w.key+":fence")
			if err != nil {
				w.t.Error(err)
				return
			}
			res, err := fencing.NewGuarded(w.coord, w.key+":res")
			if err != nil {
				w.t.Error(err)
				return
			}
			var l *held
			var token int64
			write := func() {
				ctx, cancel := w.op()
				defer cancel()
				v := fmt.Sprintf("%d by %d", token, w.c)
				_, _ = lincheck.Do(w.h, w.c, lincheck.GuardedSet{Token: token, Value: v}, func() (lincheck.SetResult, error) {
					ok, cur, err := res.Set(ctx, token, []byte(v), 0)
					return lincheck.SetResult{Accepted: ok, Current: cur}, err
				})
			}
			read := func() {
				ctx, cancel := w.op()
				defer cancel()
				_, _ = lincheck.Do(w.h, w.c, lincheck.GuardedGet{}, func() (lincheck.GetResult, error) {
					v, tok, found, err := res.Get(ctx)
					return lincheck.GetResult{Found: found, Token: tok, Value: string(v)}, err
				})
			}
			for range 8 {
				switch {
				case l == nil && w.rng.IntN(5) == 0:
					read()
				case l == nil:
					ttl := pick(w.rng, ttls...)
					id := w.id()
					ctx, cancel := w.op()
					call := time.Now()
					var lk *fencing.Lock
					_, _ = lincheck.Do(w.h, w.c, lincheck.FencedAcquire{ID: id, TTL: ttl}, func() (lincheck.FencedGrant, error) {
						var err error
						lk, err = mu.TryAcquire(ctx, ttl)
						if errors.Is(err, coordination.ErrNotAcquired) {
							return lincheck.FencedGrant{}, nil
						}
						return lincheck.FencedGrant{Granted: err == nil, Token: lk.FencingToken()}, err
					})
					cancel()
					if lk != nil {
						l, token = &held{h: lk, id: id, ttl: ttl, sent: call}, lk.FencingToken()
					}
				case w.rng.IntN(3) == 0:
					write()
				case w.rng.IntN(8) == 0:
					read()
				default:
					if !w.leaseOp(l) {
						l = nil
						if w.rng.IntN(3) == 0 {
							write() // a late write after the release
						}
					}
				}
				w.pause(30 * time.Millisecond)
			}
			w.release(l)
		},
	}
}

// latchWorkload: client 0 resets the latch now and then (a new
// generation, with a deadline or a key TTL at times); every client
// creates or joins it and counts it down and reads it.
func latchWorkload() workload {
	return workload{
		name: "latch", clients: 3, longest: time.Second,
		model: func() porcupine.Model { return lincheck.LatchSpec().Model() },
		keys:  func(key string) []string { return []string{key} },
		run: func(w *hctx) {
			var l *latch.Generation
			var hid string
			for range 8 {
				ctx, cancel := w.op()
				switch k := w.rng.IntN(10); {
				case l == nil || k == 0 || (w.c == 0 && k == 1):
					id := w.id()
					mk := lincheck.LatchMake{H: id, Reset: w.c == 0 && w.rng.IntN(2) == 0, Count: 2 + w.rng.Int64N(3)}
					if !mk.Reset && w.rng.IntN(2) == 0 {
						_, _ = lincheck.Do(w.h, w.c, lincheck.LatchJoin{H: id}, func() (lincheck.LatchJoined, error) {
							lt, err := latch.New(w.coord, w.key)
							if err != nil {
								return lincheck.LatchJoined{}, err
							}
							x, err := lt.Join(ctx)
							if errors.Is(err, latch.ErrNotFound) {
								return lincheck.LatchJoined{NotFound: true}, nil
							}
							if err != nil {
								return lincheck.LatchJoined{}, err
							}
							l, hid = x, id
							return lincheck.LatchJoined{Generation: x.Number(), Initial: x.Initial()}, nil
						})
						break
					}
					var opts []latch.Option
					if w.rng.IntN(3) == 0 {
						mk.Deadline = pick(w.rng, 100*time.Millisecond, 200*time.Millisecond)
						opts = append(opts, latch.WithDeadline(mk.Deadline))
					}
					if w.rng.IntN(4) == 0 {
						mk.KeyTTL = pick(w.rng, 200*time.Millisecond, 400*time.Millisecond)
						opts = append(opts, latch.WithKeyTTL(mk.KeyTTL))
					}
					_, _ = lincheck.Do(w.h, w.c, mk, func() (lincheck.LatchMade, error) {
						lt, err := latch.New(w.coord, w.key, opts...)
						if err != nil {
							return lincheck.LatchMade{}, err
						}
						var x *latch.Generation
						if mk.Reset {
							x, err = lt.Reset(ctx, mk.Count)
						} else {
							x, err = lt.Create(ctx, mk.Count)
						}
						if errors.Is(err, latch.ErrExists) {
							return lincheck.LatchMade{Exists: true}, nil
						}
						if err != nil {
							return lincheck.LatchMade{}, err
						}
						l, hid = x, id
						return lincheck.LatchMade{Generation: x.Number()}, nil
					})
				case k < 4:
					_, _ = lincheck.Do(w.h, w.c, lincheck.LatchRead{H: hid}, func() (lincheck.LatchCount, error) {
						return latchCount(l.Count(ctx))
					})
				default:
					_, _ = lincheck.Do(w.h, w.c, lincheck.LatchCountDown{H: hid}, func() (lincheck.LatchCount, error) {
						return latchCount(l.CountDown(ctx))
					})
				}
				cancel()
				w.pause(25 * time.Millisecond)
			}
		},
	}
}

// latchCount turns a count-down's or a read's answer into the model's.
func latchCount(n int64, err error) (lincheck.LatchCount, error) {
	switch {
	case err == nil:
		return lincheck.LatchCount{Count: n}, nil
	case errors.Is(err, latch.ErrStaleGeneration):
		return lincheck.LatchCount{Stale: true}, nil
	case errors.Is(err, latch.ErrNotFound):
		return lincheck.LatchCount{NotFound: true}, nil
	case errors.Is(err, latch.ErrCompleted):
		return lincheck.LatchCount{Completed: true}, nil
	case errors.Is(err, latch.ErrBroken):
		return lincheck.LatchCount{Broken: true, Count: n}, nil
	}
	return lincheck.LatchCount{}, err
}

// idempotencyTTL is the claims' TTL (pending and result) in the
// idempotency histories.
const idempotencyTTL = 250 * time.Millisecond

// idempotencyWorkload: clients begin work on one key (now and then with
// another request's fingerprint), complete, abandon or fail what they started,
// sometimes after stalling past the claim's TTL, and replay results.
func idempotencyWorkload() workload {
	return workload{
		name: "idempotency", clients: 3, longest: idempotencyTTL,
		model: func() porcupine.Model { return lincheck.IdempotencySpec().Model() },
		run: func(w *hctx) {
			st, err := idempotency.New(w.coord)
			if err != nil {
				w.t.Error(err)
				return
			}
			var owner, result string
			for range 8 {
				ctx, cancel := w.op()
				switch k := w.rng.IntN(10); {
				case owner == "":
					fp := pick(w.rng, "a", "a", "a", "a", "b")
					_, _ = lincheck.Do(w.h, w.c, lincheck.Begin{FP: fp, TTL: idempotencyTTL}, func() (lincheck.Begun, error) {
						c, err := st.Begin(ctx, w.key, idempotencyTTL, idempotency.WithFingerprint(fp))
						if err != nil {
							return lincheck.Begun{}, err
						}
						b := lincheck.Begun{Owner: c.Owner, Result: string(c.Result), Remaining: c.Remaining}
						switch c.State {
						case idempotency.Started:
							b.State = "started"
							owner, result = c.Owner, fmt.Sprintf("result %s of client %d", w.id(), w.c)
						case idempotency.Completed:
							b.State = "completed"
						case idempotency.InProgress:
							b.State = "in_progress"
						case idempotency.FingerprintMismatch:
							b.State = "mismatch"
						case idempotency.Failed:
							b.State = "failed"
						}
						return b, nil
					})
				case k < 6:
					if k == 0 {
						time.Sleep(idempotencyTTL + 20*time.Millisecond) // the work outlives the claim
					}
					_, _ = lincheck.Do(w.h, w.c, lincheck.Complete{Owner: owner, Result: result, TTL: idempotencyTTL}, func() (bool, error) {
						return st.Complete(ctx, w.key, owner, []byte(result))
					})
					owner = ""
				case k < 8:
					_, _ = lincheck.Do(w.h, w.c, lincheck.Abandon{Owner: owner}, func() (bool, error) {
						return st.Abandon(ctx, w.key, owner)
					})
					owner = ""
				default:
					_, _ = lincheck.Do(w.h, w.c, lincheck.Fail{Owner: owner}, func() (bool, error) {
						return st.Fail(ctx, w.key, owner)
					})
					owner = ""
				}
				cancel()
				w.pause(30 * time.Millisecond)
			}
		},
	}
}

// concurrencyLease is the concurrency limiter's lease duration in the
// histories; holds are shorter, so a held lease never depends on its
// background renewals.
const concurrencyLease = 600 * time.Millisecond

// concurrencyWorkload: clients take one or two permits of a concurrency
// limiter of 2, hold them a little and release them.
func concurrencyWorkload() workload {
	rules := lincheck.LeaseRules{Capacity: 2, Renewed: concurrencyLease}
	return workload{
		name: "concurrency", clients: 3, longest: concurrencyLease,
		model: func() porcupine.Model { return lincheck.LeaseSpec(rules).Model() },
		run: func(w *hctx) {
			lim, err := ratelimit.NewConcurrency(w.coord, w.key, 2, ratelimit.WithLeaseDuration(concurrencyLease))
			if err != nil {
				w.t.Error(err)
				return
			}
			defer lim.Close()
			var lease *ratelimit.ConcurrencyLease
			var id string
			release := func() {
				ctx, cancel := w.op()
				defer cancel()
				_, _ = lincheck.Do(w.h, w.c, lincheck.Release{ID: id}, func() (coordination.ReleaseOutcome, error) {
					_, err := lease.Release(ctx) // Released or AlreadyReleased: the permits are free
					return coordination.Released, err
				})
				lease = nil
			}
			for range 8 {
				if lease != nil {
					release()
				} else {
					ctx, cancel := w.op()
					id = w.id()
					n := pick(w.rng, 1, 1, 2)
					_, _ = lincheck.Do(w.h, w.c, lincheck.Acquire{ID: id, N: int64(n)}, func() (bool, error) {
						l, err := lim.TryAcquire(ctx, n)
						if errors.Is(err, coordination.ErrNotAcquired) {
							return false, nil
						}
						lease = l
						return err == nil, err
					})
					cancel()
				}
				w.pause(40 * time.Millisecond)
			}
			if lease != nil {
				release()
			}
		},
	}
}

// rateWorkload: clients ask a rate limiter for one permit (two at times)
// with short pauses; besides the model, the grants within any window stay
// within the algorithms' bound.
func rateWorkload(name string, cfg []ratelimit.Settings, algs []any) workload {
	// A re-sent grant is recognised by the key (one decision per call), so
	// a call's sends have one effect, except across a fixed window's end,
	// where the key expires: a history with a call as long as a fixed
	// window is set aside.
	window, longest := time.Duration(0), time.Second
	for _, a := range algs {
		switch a := a.(type) {
		case lincheck.Fixed:
			window = max(window, a.Window)
			longest = min(longest, a.Window)
		case lincheck.Sliding:
			window = max(window, a.Window)
		case lincheck.Bucket:
			window = max(window, 3*a.Period)
		case lincheck.GCRA:
			window = max(window, 3*a.Interval)
		}
	}
	return workload{
		name: name, clients: 3, longest: longest,
		model: func() porcupine.Model { return lincheck.RateSpec(algs...).Model() },
		check: func(h *lincheck.History) error {
			bound := int64(-1)
			for _, a := range algs {
				if b := lincheck.Bound(a, window); bound < 0 || b < bound {
					bound = b
				}
			}
			if most, ok := lincheck.CheckBound(h.Operations(), window, bound); !ok {
				return fmt.Errorf("%d permits granted within %v, above the bound %d", most, window, bound)
			}
			return nil
		},
		run: func(w *hctx) {
			var s ratelimit.Settings = ratelimit.Composite{Components: cfg}
			if len(cfg) == 1 {
				s = cfg[0]
			}
			lim, err := ratelimit.New(w.coord, w.key, s)
			if err != nil {
				w.t.Error(err)
				return
			}
			defer lim.Close()
			for range 10 {
				ctx, cancel := w.op()
				n := pick(w.rng, 1, 1, 1, 2)
				_, _ = lincheck.Do(w.h, w.c, lincheck.Allow{N: int64(n)}, func() (bool, error) {
					l, err := lim.Allow(ctx, n)
					return l.Allowed(), err
				})
				cancel()
				w.pause(20 * time.Millisecond)
			}
		},
	}
}

// denyWorkload: clients deny one identity (without end, or for 100-300
// ms), remove it and check it, through deny lists with the cache off
// (every check reads Redis; the cache's staleness is documented, not
// linearizable).
func denyWorkload() workload {
	return workload{
		name: "denylist", clients: 3, longest: 100 * time.Millisecond,
		model: func() porcupine.Model { return lincheck.DenySpec().Model() },
		keys:  func(key string) []string { return []string{key} },
		run: func(w *hctx) {
			dl, err := ratelimit.NewDenyList(w.coord, w.key, ratelimit.WithDenyCache(1, 0))
			if err != nil {
				w.t.Error(err)
				return
			}
			for range 8 {
				ctx, cancel := w.op()
				switch k := w.rng.IntN(10); {
				case k < 4:
					_, _ = lincheck.Do(w.h, w.c, lincheck.DenyRead{}, func() (bool, error) {
						return dl.Denied(ctx, "tenant-7")
					})
				case k < 5:
					_, _ = lincheck.Do(w.h, w.c, lincheck.DenyWrite{}, func() (bool, error) {
						return true, dl.Deny(ctx, "tenant-7")
					})
				case k < 8:
					d := time.Duration(100+w.rng.IntN(200)) * time.Millisecond
					_, _ = lincheck.Do(w.h, w.c, lincheck.DenyWrite{For: d}, func() (bool, error) {
						return true, dl.DenyFor(ctx, "tenant-7", d)
					})
				default:
					_, _ = lincheck.Do(w.h, w.c, lincheck.DenyWrite{Remove: true}, func() (bool, error) {
						return true, dl.Remove(ctx, "tenant-7")
					})
				}
				cancel()
				w.pause(30 * time.Millisecond)
			}
		},
	}
}
