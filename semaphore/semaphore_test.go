package semaphore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/semaphore"
)

// Capacity 4, 10 concurrent acquirers: exactly 4 hold; a 5th succeeds only
// after a release or an expiry; the expired permit is pruned by that call.
func TestCapacityFourOfTenConcurrentAcquirers(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Raw(t)
		sems := make([]*semaphore.Semaphore, 10)
		for i := range sems {
			sems[i] = newSem(t, b.Coordinator(t), 4) // one client per acquirer
		}
		permits := make([]*semaphore.Permit, 10)
		errs := make([]error, 10)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i, s := range sems {
			wg.Go(func() {
				<-start
				permits[i], errs[i] = s.TryAcquire(ctx, time.Minute)
			})
		}
		close(start)
		wg.Wait()
		var held []*semaphore.Permit
		for i, err := range errs {
			switch {
			case err == nil:
				held = append(held, permits[i])
			case !errors.Is(err, coordination.ErrNotAcquired):
				t.Fatalf("acquirer %d: %v", i, err)
			}
		}
		if len(held) != 4 {
			t.Fatalf("%d acquirers hold a permit, want exactly 4", len(held))
		}
		if got := members(t, b, raw); len(got) != 4 {
			t.Fatalf("key holds %d permits %v, want 4", len(got), got)
		}
		st, err := sems[0].State(ctx)
		if err != nil || st != (semaphore.State{Capacity: 4, Used: 4, Holders: 4}) {
			t.Fatalf("State = %+v, %v; want capacity 4, 4 used by 4 holders", st, err)
		}

		fifth := newSem(t, b.Coordinator(t), 4)
		p, err := fifth.TryAcquire(ctx, time.Minute)
		wantNotAcquired(t, p, err)

		// After a release.
		if out := release(t, held[0]); out != coordination.Released {
			t.Fatalf("Release = %v, want released", out)
		}
		p5, err := fifth.TryAcquire(ctx, time.Minute)
		if err != nil {
			t.Fatalf("5th acquirer after a release: %v", err)
		}
		p, err = fifth.TryAcquire(ctx, time.Minute)
		wantNotAcquired(t, p, err)

		// After an expiry: one holder's permit now expires in 1 s.
		if ok, err := held[1].Refresh(ctx, time.Second); !ok || err != nil {
			t.Fatalf("Refresh(1s) = %v, %v", ok, err)
		}
		p, err = fifth.TryAcquire(ctx, time.Minute)
		wantNotAcquired(t, p, err)
		b.Advance(1100 * time.Millisecond)
		expired := memberOf(held[1])
		if !slices.Contains(members(t, b, raw), expired) {
			t.Fatalf("the expired permit was removed before any call; want it pruned by the next call")
		}
		p6, err := fifth.TryAcquire(ctx, time.Minute)
		if err != nil {
			t.Fatalf("acquire after an expiry: %v", err)
		}
		got := members(t, b, raw)
		if slices.Contains(got, expired) || !slices.Contains(got, memberOf(p6)) || !slices.Contains(got, memberOf(p5)) || len(got) != 4 {
			t.Fatalf("members after the acquisition = %v; want the expired %s pruned and 4 live permits", got, expired)
		}
		for _, p := range append(held[2:], p5, p6) {
			release(t, p)
		}
	})
}

// A blocked Acquire gets the permit when the holder releases (woken by the
// release notification, well before the 5 s re-check) or when the holder's
// permit expires.
func TestAcquireWaitsForReleaseOrExpiry(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		holderSem := newSem(t, b.Coordinator(t), 2)
		waiterSem := newSem(t, b.Coordinator(t), 2)
		type result struct {
			p   *semaphore.Permit
			err error
			at  time.Time
		}

		// Release: the waiter needs 2 permits, the holder has 1 of 2.
		holder := mustAcquireN(t, holderSem, 1, time.Minute)
		got := make(chan result, 1)
		go func() {
			p, err := waiterSem.AcquireN(ctx, 2, time.Minute)
			got <- result{p, err, time.Now()}
		}()
		select {
		case r := <-got:
			t.Fatalf("AcquireN returned %v, %v while the holder held a permit", r.p, r.err)
		case <-time.After(300 * time.Millisecond):
		}
		released := time.Now()
		release(t, holder)
		var r result
		select {
		case r = <-got:
		case <-time.After(3 * time.Second):
			t.Fatalf("waiter not woken within 3s of the release")
		}
		if r.err != nil || r.p.N() != 2 {
			t.Fatalf("AcquireN after release = %v, %v", r.p, r.err)
		}
		if d := r.at.Sub(released); d > 2*time.Second {
			t.Fatalf("waiter took %v after the release; want it woken by the notification, not the 5s re-check", d)
		}
		release(t, r.p)

		// Expiry: the holder never releases (it crashed). Its permits expire
		// (on the server's clock) no earlier than ttl after sent.
		const ttl = time.Second
		sent := time.Now()
		mustAcquireN(t, holderSem, 2, ttl)
		go func() {
			p, err := waiterSem.Acquire(ctx, time.Minute)
			got <- result{p, err, time.Now()}
		}()
		expired := sent.Add(ttl - time.Millisecond) // server time is whole ms
		if b.IsMini() {
			stillWaiting := time.After(100 * time.Millisecond)
			select {
			case r := <-got:
				t.Fatalf("Acquire returned %v, %v before the holder's permit expired", r.p, r.err)
			case <-stillWaiting:
			}
			expired = time.Now() // miniredis' clock moves only here
			b.Advance(ttl + 100*time.Millisecond)
		}
		select {
		case r = <-got:
		case <-time.After(ttl + 3*time.Second):
			t.Fatalf("waiter did not get the permit within 3s of the holder's expiry")
		}
		if r.err != nil {
			t.Fatalf("Acquire after expiry: %v", r.err)
		}
		if r.at.Before(expired) {
			t.Fatalf("waiter got the permit %v before the holder's permit expired", expired.Sub(r.at))
		}
		release(t, r.p)
	})
}

// A different capacity while a permit is live fails with a typed error and
// writes nothing; with no live permit the new capacity is accepted; lowering
// the capacity never revokes a live permit.
func TestCapacityMismatch(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Raw(t)
		four := newSem(t, b.Coordinator(t), 4)
		held := []*semaphore.Permit{
			mustAcquireN(t, four, 1, time.Minute),
			mustAcquireN(t, four, 2, time.Minute),
		}
		before := snapshot(t, b, raw)
		for _, capacity := range []int64{5, 2, 1} {
			other := newSem(t, b.Coordinator(t), capacity)
			p, err := other.TryAcquire(ctx, time.Minute)
			if !errors.Is(err, coordination.ErrConfigMismatch) || p != nil {
				t.Fatalf("capacity %d with live permits of capacity 4: %v, %v; want ErrConfigMismatch (capacity)", capacity, p, err)
			}
			// The blocking form fails at once too: the error is terminal.
			actx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_, err = other.Acquire(actx, time.Minute)
			cancel()
			if !errors.Is(err, coordination.ErrConfigMismatch) {
				t.Fatalf("Acquire with capacity %d: %v; want ErrConfigMismatch (capacity)", capacity, err)
			}
			if after := snapshot(t, b, raw); after != before {
				t.Fatalf("a capacity mismatch wrote to the key:\nbefore %s\nafter  %s", before, after)
			}
		}
		for _, p := range held {
			if ok, err := p.Verify(ctx); !ok || err != nil {
				t.Fatalf("a lower capacity revoked a live permit: Verify = %v, %v", ok, err)
			}
		}
		if st, err := four.State(ctx); err != nil || st.Capacity != 4 || st.Used != 3 {
			t.Fatalf("State = %+v, %v; want capacity 4 with 3 used", st, err)
		}

		// No live permit: the next capacity is accepted.
		for _, p := range held {
			release(t, p)
		}
		if n, _ := raw.Exists(ctx, b.Key(key)).Result(); n != 0 {
			t.Fatalf("key still exists after the last release")
		}
		two := newSem(t, b.Coordinator(t), 2)
		p2 := mustAcquireN(t, two, 2, time.Minute)
		if c, err := raw.ZScore(ctx, b.Key(key), "capacity").Result(); err != nil || c != -2 {
			t.Fatalf("capacity record = %v, %v; want -2", c, err)
		}
		release(t, p2)

		// Only expired permits of another capacity: they do not count, and
		// the acquisition prunes them.
		past := strconv.FormatInt(b.Now().Add(-time.Second).UnixMilli(), 10)
		if err := raw.ZAdd(ctx, b.Key(key), redis.Z{Score: -2, Member: "capacity"}, redis.Z{Score: mustFloat(past), Member: "P:1:dead"}).Err(); err != nil {
			t.Fatal(err)
		}
		p4 := mustAcquireN(t, four, 4, time.Minute)
		if got := members(t, b, raw); !slices.Equal(got, []string{memberOf(p4)}) {
			t.Fatalf("members = %v; want only the new permit", got)
		}
		if c, _ := raw.ZScore(ctx, b.Key(key), "capacity").Result(); c != -4 {
			t.Fatalf("capacity record = %v; want -4", c)
		}
		release(t, p4)
	})
}

func mustFloat(s string) float64 {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		panic(err)
	}
	return f
}

// Weighted: capacity 5, holding 3, TryAcquireN(3) fails and leaves state
// unchanged; TryAcquireN(2) succeeds; n > capacity is an argument error.
func TestWeightedAllOrNothing(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Raw(t)
		s := newSem(t, b.Coordinator(t), 5)
		three := mustAcquireN(t, s, 3, time.Minute)
		before := snapshot(t, b, raw)
		p, err := s.TryAcquireN(ctx, 3, time.Minute)
		wantNotAcquired(t, p, err)
		if after := snapshot(t, b, raw); after != before {
			t.Fatalf("a refused TryAcquireN(3) changed the key:\nbefore %s\nafter  %s", before, after)
		}
		two, err := s.TryAcquireN(ctx, 2, time.Minute)
		if err != nil || two.N() != 2 {
			t.Fatalf("TryAcquireN(2) = %v, %v", two, err)
		}
		if st, err := s.State(ctx); err != nil || st != (semaphore.State{Capacity: 5, Used: 5, Holders: 2}) {
			t.Fatalf("State = %+v, %v; want 5 of 5 used by 2 holders", st, err)
		}
		p, err = s.TryAcquire(ctx, time.Minute)
		wantNotAcquired(t, p, err)

		_, err = s.TryAcquireN(ctx, 6, time.Minute)
		wantArgument(t, err, "n")
		_, err = s.AcquireN(ctx, 6, time.Minute)
		wantArgument(t, err, "n")

		// Releasing the 3 frees all 3 at once.
		release(t, three)
		again, err := s.TryAcquireN(ctx, 3, time.Minute)
		if err != nil {
			t.Fatalf("TryAcquireN(3) after the release of 3: %v", err)
		}
		got := members(t, b, raw)
		slices.Sort(got)
		want := []string{memberOf(two), memberOf(again)}
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("members = %v, want %v", got, want)
		}
		release(t, two)
		release(t, again)
	})
}

// A crashed holder (never releases) frees its permit at expiry, and the key
// disappears with the last permit.
func TestCrashedHolderFreesAtExpiry(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Raw(t)
		crashed := newSem(t, b.Coordinator(t), 1)
		mustAcquireN(t, crashed, 1, time.Second) // never released
		other := newSem(t, b.Coordinator(t), 1)
		p, err := other.TryAcquire(ctx, time.Minute)
		wantNotAcquired(t, p, err)
		b.Advance(1100 * time.Millisecond)
		if n, _ := raw.Exists(ctx, b.Key(key)).Result(); n != 0 {
			t.Fatalf("the key outlived its only (expired) permit")
		}
		p, err = other.TryAcquire(ctx, time.Minute)
		if err != nil {
			t.Fatalf("acquire after the crashed holder's expiry: %v", err)
		}
		release(t, p)
	})
}

// A permit without expiry (only a hand edit makes one) survives its
// holder's crash until removed by hand with the documented commands.
func TestNoExpiryPermitManualRecovery(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Raw(t)
		crashed := newSem(t, b.Coordinator(t), 2)
		dead := mustAcquireN(t, crashed, 2, time.Minute) // never released
		testharness.PermitWithoutExpiry(t, raw, b.Key(key), memberOf(dead))
		if pttl, _ := raw.PTTL(ctx, b.Key(key)).Result(); pttl != -1 {
			t.Fatalf("PTTL = %v; want no key expiry while a permit without expiry is held", pttl)
		}
		b.Advance(time.Second)
		other := newSem(t, b.Coordinator(t), 2)
		p, err := other.TryAcquire(ctx, time.Minute)
		wantNotAcquired(t, p, err)
		if st, err := other.State(ctx); err != nil || st.NoExpiry != 1 || st.Used != 2 {
			t.Fatalf("State = %+v, %v; want one holder of 2 without expiry", st, err)
		}

		// The recovery documented in the package: list, then remove.
		stale, err := raw.ZRangeByScore(ctx, b.Key(key), &redis.ZRangeBy{Min: "+inf", Max: "+inf"}).Result()
		if err != nil || !slices.Equal(stale, []string{memberOf(dead)}) {
			t.Fatalf("ZRANGEBYSCORE +inf +inf = %v, %v; want [%s]", stale, err, memberOf(dead))
		}
		if n, err := raw.ZRem(ctx, b.Key(key), stale[0]).Result(); n != 1 || err != nil {
			t.Fatalf("ZREM = %d, %v", n, err)
		}
		p, err = other.TryAcquireN(ctx, 2, time.Minute)
		if err != nil {
			t.Fatalf("acquire after manual recovery: %v", err)
		}
		release(t, p)
	})
}

// An expired owner cannot renew or release a permit whose slot went to
// someone else, and its attempts leave the new holder's permit alone.
func TestExpiredOwnerCannotRenewOrRelease(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Raw(t)
		oldSem := newSem(t, b.Coordinator(t), 1)
		old := mustAcquireN(t, oldSem, 1, 200*time.Millisecond)
		b.Advance(300 * time.Millisecond)
		next, err := newSem(t, b.Coordinator(t), 1).TryAcquire(ctx, time.Minute)
		if err != nil {
			t.Fatalf("new holder: %v", err)
		}
		before := snapshot(t, b, raw)
		if ok, err := old.Refresh(ctx, time.Minute); ok || err != nil {
			t.Fatalf("old owner's Refresh = %v, %v; want false", ok, err)
		}
		if out, err := old.Release(ctx); out != coordination.AlreadyReleased || err != nil {
			t.Fatalf("old owner's Release = %v, %v; want already released", out, err)
		}
		if !errors.Is(context.Cause(old.Context()), coordination.ErrLost) {
			t.Fatalf("old owner's context cause = %v, want ErrLost", context.Cause(old.Context()))
		}
		if after := snapshot(t, b, raw); after != before {
			t.Fatalf("the old owner changed the key:\nbefore %s\nafter  %s", before, after)
		}
		if ok, err := next.Verify(ctx); !ok || err != nil {
			t.Fatalf("new holder's Verify = %v, %v", ok, err)
		}
		release(t, next)
	})
}

// Verify finding the permit gone cancels the permit's context with ErrLost;
// Release cancels it with ErrReleased, and a second Release answers
// AlreadyReleased without Redis.
func TestPermitContext(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Raw(t)
		s := newSem(t, b.Coordinator(t), 3)
		gone := mustAcquireN(t, s, 1, time.Minute)
		if err := gone.Context().Err(); err != nil {
			t.Fatalf("context of a held permit: %v", err)
		}
		if err := raw.ZRem(ctx, b.Key(key), memberOf(gone)).Err(); err != nil {
			t.Fatal(err)
		}
		if ok, err := gone.Verify(ctx); ok || err != nil {
			t.Fatalf("Verify of a removed permit = %v, %v", ok, err)
		}
		if !errors.Is(context.Cause(gone.Context()), coordination.ErrLost) || gone.Remaining() != 0 {
			t.Fatalf("after a failed Verify: cause %v, remaining %v", context.Cause(gone.Context()), gone.Remaining())
		}

		p := mustAcquireN(t, s, 1, time.Minute)
		if r := p.Remaining(); r <= 59*time.Second || r > time.Minute {
			t.Fatalf("Remaining = %v, want just under 1m", r)
		}
		if out := release(t, p); out != coordination.Released {
			t.Fatalf("Release = %v", out)
		}
		if !errors.Is(context.Cause(p.Context()), coordination.ErrReleased) {
			t.Fatalf("cause after Release = %v", context.Cause(p.Context()))
		}
		if out := release(t, p); out != coordination.AlreadyReleased {
			t.Fatalf("second Release = %v, want already released", out)
		}
		var nilPermit *semaphore.Permit
		var zero coordination.Lease
		if zero.Remaining() != 0 || !errors.Is(context.Cause(zero.Context()), coordination.ErrNotHeld) || nilPermit.N() != 0 {
			t.Fatalf("the zero lease must report not held")
		}
		if ok, err := zero.Verify(context.Background()); ok || err != nil {
			t.Fatalf("zero lease Verify = %v, %v", ok, err)
		}
	})
}

// A blocked Acquire gives up when its context ends, with both
// ErrNotAcquired and the context's error, and leaves nothing behind.
func TestAcquireGivesUpWithContext(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		raw := b.Raw(t)
		s := newSem(t, b.Coordinator(t), 1)
		holder := mustAcquireN(t, s, 1, time.Minute)
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		p, err := s.Acquire(ctx, time.Minute)
		if p != nil || !errors.Is(err, coordination.ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Acquire = %v, %v; want ErrNotAcquired and DeadlineExceeded", p, err)
		}
		if got := members(t, b, raw); !slices.Equal(got, []string{memberOf(holder)}) {
			t.Fatalf("members = %v; want only the holder", got)
		}
		release(t, holder)
	})
}

// KeepAlive keeps a permit alive well past its TTL, each renewal setting
// its expiry a full TTL after the server's time; Release stops it.
func TestKeepAlive(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Raw(t)
		// Renewed every second (TTL/3), with two seconds of margin.
		const ttl = 3 * time.Second
		s := newSem(t, b.Coordinator(t), 1)
		p := mustAcquireN(t, s, 1, ttl)
		// read returns the permit's expiry on the server and the server
		// time before the read.
		read := func() (time.Time, time.Time) {
			t.Helper()
			at := b.Now()
			score, err := raw.ZScore(ctx, b.Key(key), memberOf(p)).Result()
			if err != nil {
				t.Fatalf("ZSCORE of the permit: %v", err)
			}
			return time.UnixMilli(int64(score)), at
		}
		first, since := read() // the acquisition's expiry; the next renewal runs after since
		p.KeepAlive()
		const slack = 10 * time.Millisecond // clocks and millisecond rounding
		last := first
		for n := 1; n <= 3 || !b.Now().After(first.Add(time.Second)); n++ {
			if n > 20 {
				t.Fatalf("%d renewals, and the server's time is still not past %v", n-1, first.Add(time.Second))
			}
			if b.IsMini() {
				// The server's clock moves on by less than the TTL, only
				// after the last renewal was seen (real servers' clocks
				// move on in real time, by the renewal period).
				b.Advance(ttl * 2 / 3)
				since = b.Now()
			}
			var got, at time.Time
			eventually(t, 10*time.Second, fmt.Sprintf("renewal %d", n), func() bool {
				if !at.IsZero() {
					since = at // not renewed yet then
				}
				got, at = read()
				return got.After(last)
			})
			// The renewal ran between since and now, and set the expiry a
			// full TTL after its server time.
			if lo, hi := since.Add(ttl-slack), b.Now().Add(ttl+slack); got.Before(lo) || got.After(hi) {
				t.Fatalf("renewal %d set the expiry to %v, want a TTL after the renewal, in [%v, %v]", n, got, lo, hi)
			}
			if p.Remaining() <= 0 {
				t.Fatalf("not held after renewal %d", n)
			}
			last, since = got, at // the next renewal runs after this read
		}
		// The server's time is past the acquisition's expiry: only the
		// renewals keep the permit.
		if ok, err := p.Verify(ctx); !ok || err != nil {
			t.Fatalf("Verify past the acquisition's expiry (%v) = %v, %v", first, ok, err)
		}
		other, err := s.TryAcquire(ctx, time.Minute)
		wantNotAcquired(t, other, err)
		release(t, p)
	})
}

// KeepAlive called when less than a renewal period (TTL/3) of the permit
// is left renews at once: the first renewal is due a third of the TTL
// after the acquisition was sent, long past. (It was scheduled a third of
// the TTL after KeepAlive, past the local deadline: the permit, which the
// server still held, was reported lost.)
func TestKeepAliveStartedLateRenewsAtOnce(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Raw(t)
		const ttl = 3 * time.Second // renewed every second
		s := newSem(t, b.Coordinator(t), 1)
		var (
			p    *semaphore.Permit
			left time.Duration
		)
		for try := 1; ; try++ {
			p = mustAcquireN(t, s, 1, ttl)
			time.Sleep(p.Remaining() - 700*time.Millisecond)
			if left = p.Remaining(); left >= 300*time.Millisecond {
				break
			}
			release(t, p) // the machine stalled past the point: again
			if try == 5 {
				t.Fatalf("%d tries slept past 300 ms before the local deadline", try)
			}
		}
		if left > 700*time.Millisecond {
			t.Fatalf("Remaining = %v after the sleep, want at most 700ms", left)
		}
		since := b.Now() // the renewal's server time is later
		p.KeepAlive()
		eventually(t, 2*time.Second, "the renewal of a permit with little time left", func() bool {
			return p.Remaining() > 2*time.Second
		})
		// The renewal set the permit's expiry a full TTL after its server
		// time.
		score, err := raw.ZScore(ctx, b.Key(key), memberOf(p)).Result()
		if exp := time.UnixMilli(int64(score)); err != nil || exp.Before(since.Add(ttl-10*time.Millisecond)) {
			t.Fatalf("the permit's expiry on the server = %v (%v), want at least a TTL after %v", exp, err, since)
		}
		select {
		case <-p.Context().Done():
			t.Fatalf("lost while kept alive: %v", context.Cause(p.Context()))
		case <-time.After(3 * ttl):
		}
		other, err := s.TryAcquire(ctx, time.Minute)
		wantNotAcquired(t, other, err)
		if out := release(t, p); out != coordination.Released {
			t.Fatalf("Release = %v, want Released", out)
		}
	})
}

// A TTL below 1 ms, 0 included, is refused by every acquisition and by
// Refresh with ErrInvalidArgument naming ttl, before anything is sent: a
// permit always has a lease. (A TTL of 0 took a permit without expiry, and
// Refresh(0) removed a held permit's expiry.)
func TestZeroTTLRefused(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Raw(t)
		coord := b.Coordinator(t)
		s := newSem(t, coord, 2)
		p := mustAcquireN(t, s, 1, time.Minute)
		before := snapshot(t, b, raw)
		counter := testharness.CountCommands(coord.Client())
		for _, ttl := range []time.Duration{0, time.Nanosecond, 999 * time.Microsecond} {
			for name, acquire := range map[string]func() (*semaphore.Permit, error){
				"TryAcquire":  func() (*semaphore.Permit, error) { return s.TryAcquire(ctx, ttl) },
				"Acquire":     func() (*semaphore.Permit, error) { return s.Acquire(ctx, ttl) },
				"TryAcquireN": func() (*semaphore.Permit, error) { return s.TryAcquireN(ctx, 1, ttl) },
				"AcquireN":    func() (*semaphore.Permit, error) { return s.AcquireN(ctx, 1, ttl) },
			} {
				q, err := acquire()
				if q != nil {
					t.Fatalf("%s(%v) took a permit", name, ttl)
				}
				wantArgument(t, err, "ttl")
			}
			ok, err := p.Refresh(ctx, ttl)
			if ok {
				t.Fatalf("Refresh(%v) = true", ttl)
			}
			wantArgument(t, err, "ttl")
		}
		if n := counter.Count(); n != 0 {
			t.Fatalf("TTLs below 1 ms sent %d commands %v; want none", n, counter.Names())
		}
		if after := snapshot(t, b, raw); after != before {
			t.Fatalf("refused TTLs changed the key:\nbefore %s\nafter  %s", before, after)
		}
		if ok, err := p.Verify(ctx); !ok || err != nil || p.Remaining() <= 0 || p.Remaining() > time.Minute {
			t.Fatalf("the held permit after refused refreshes: Verify = %v, %v; Remaining %v", ok, err, p.Remaining())
		}
		if out := release(t, p); out != coordination.Released {
			t.Fatalf("Release = %v", out)
		}
	})
}

// The key's TTL follows the latest permit expiry; a permit without expiry
// (made by hand) keeps it off until the permit gets an expiry again; the
// key is deleted with its last permit.
func TestKeyExpiryFollowsPermits(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Raw(t)
		pttl := func() time.Duration {
			d, err := raw.PTTL(ctx, b.Key(key)).Result()
			if err != nil {
				t.Fatal(err)
			}
			return d
		}
		s := newSem(t, b.Coordinator(t), 3)
		short := mustAcquireN(t, s, 1, 10*time.Second)
		long := mustAcquireN(t, s, 1, 20*time.Second)
		if d := pttl(); d <= 19*time.Second || d > 20*time.Second {
			t.Fatalf("PTTL = %v, want about 20s", d)
		}
		release(t, long)
		if d := pttl(); d <= 9*time.Second || d > 10*time.Second {
			t.Fatalf("PTTL after releasing the 20s permit = %v, want about 10s", d)
		}
		forever := mustAcquireN(t, s, 1, time.Minute)
		testharness.PermitWithoutExpiry(t, raw, b.Key(key), memberOf(forever)) // by hand: the library writes none
		if d := pttl(); d != -1 {
			t.Fatalf("PTTL with a permit without expiry = %v, want -1 (none)", d)
		}
		if ok, err := forever.Refresh(ctx, 30*time.Second); !ok || err != nil {
			t.Fatalf("Refresh(30s) = %v, %v", ok, err)
		}
		if d := pttl(); d <= 29*time.Second || d > 30*time.Second {
			t.Fatalf("PTTL after giving the last permit an expiry = %v, want about 30s", d)
		}
		release(t, forever)
		release(t, short)
		if n, _ := raw.Exists(ctx, b.Key(key)).Result(); n != 0 {
			t.Fatalf("key still exists after the last release")
		}
	})
}

// A key holding something else is refused before anything is written.
func TestForeignKey(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Raw(t)
		s := newSem(t, b.Coordinator(t), 2)
		held := mustAcquireN(t, s, 1, time.Minute)
		raw.Del(ctx, b.Key(key))
		if err := raw.Set(ctx, b.Key(key), "x", 0).Err(); err != nil {
			t.Fatal(err)
		}
		_, err := s.TryAcquire(ctx, time.Minute)
		if !errors.Is(err, coordination.ErrBadState) || !strings.Contains(err.Error(), "wrong Redis type") {
			t.Fatalf("TryAcquire on a string key: %v; want ErrBadState (wrong Redis type)", err)
		}
		if _, err := s.State(ctx); !errors.Is(err, coordination.ErrBadState) {
			t.Fatalf("State on a string key: %v; want ErrBadState (wrong type)", err)
		}
		if v, _ := raw.Get(ctx, b.Key(key)).Result(); v != "x" {
			t.Fatalf("the string key was changed to %q", v)
		}

		// A sorted set without the capacity record is not a semaphore.
		raw.Del(ctx, b.Key(key))
		raw.ZAdd(ctx, b.Key(key), redis.Z{Score: 1, Member: "m"})
		_, err = s.TryAcquire(ctx, time.Minute)
		if !errors.Is(err, coordination.ErrBadState) || strings.Contains(err.Error(), "wrong Redis type") {
			t.Fatalf("TryAcquire on a foreign sorted set: %v; want ErrBadState", err)
		}
		// Neither a refresh, a verify, a read nor a release prunes or
		// deletes a sorted set that is not a semaphore (its member's score
		// is long past).
		if _, err := s.State(ctx); !errors.Is(err, coordination.ErrBadState) {
			t.Fatalf("State on a foreign sorted set: %v; want ErrBadState", err)
		}
		if _, err := held.Verify(ctx); !errors.Is(err, coordination.ErrBadState) {
			t.Fatalf("Verify on a foreign sorted set: %v; want ErrBadState", err)
		}
		if _, err := held.Refresh(ctx, time.Minute); !errors.Is(err, coordination.ErrBadState) {
			t.Fatalf("Refresh on a foreign sorted set: %v; want ErrBadState", err)
		}
		if _, err := held.Release(ctx); !errors.Is(err, coordination.ErrBadState) || engine.Classify(err) != engine.Terminal {
			t.Fatalf("Release on a foreign sorted set: %v; want a terminal ErrBadState", err)
		}
		if got, _ := raw.ZRange(ctx, b.Key(key), 0, -1).Result(); !slices.Equal(got, []string{"m"}) {
			t.Fatalf("the foreign sorted set was changed: %v", got)
		}
	})
}

// replyHook replaces the reply of every successful call of one script with
// val, as a server (or a proxy, or a future version of a script) answering
// something the client does not know would.
type replyHook struct {
	sha string
	val any
}

func (h replyHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h replyHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		c, ok := cmd.(interface {
			SetVal(any)
			SetErr(error)
		}) // the engine wraps its *redis.Cmd
		if ok && (err == nil || errors.Is(err, redis.Nil)) && strings.EqualFold(cmd.Name(), "evalsha") && fmt.Sprint(cmd.Args()[1]) == h.sha {
			c.SetErr(nil)
			c.SetVal(h.val)
			return nil
		}
		return err
	}
}

func (h replyHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// A reply of an unknown shape or status is an error matching ErrBadState,
// never a default such as "not acquired", "not held" or "released"; a
// permit whose refresh, verify or release got such a reply is not marked
// lost by it.
func TestUnknownRepliesAreBadState(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		now := time.Now().UnixMilli()
		cases := []struct {
			name string
			sha  string
			val  any
			op   func(s *semaphore.Semaphore, p *semaphore.Permit) error
		}{
			{"acquire -2", semaphore.AcquireScript.Hash(), int64(-2), func(s *semaphore.Semaphore, _ *semaphore.Permit) error {
				_, err := s.TryAcquire(ctx, time.Minute)
				return err
			}},
			{"acquire as an array", semaphore.AcquireScript.Hash(), []any{int64(0), int64(5)}, func(s *semaphore.Semaphore, _ *semaphore.Permit) error {
				_, err := s.TryAcquire(ctx, time.Minute)
				return err
			}},
			{"refresh -1", semaphore.RefreshScript.Hash(), int64(-1), func(_ *semaphore.Semaphore, p *semaphore.Permit) error {
				_, err := p.Refresh(ctx, time.Minute)
				return err
			}},
			{"verify live with 0 left", semaphore.VerifyScript.Hash(), []any{int64(1), int64(0), now}, func(_ *semaphore.Semaphore, p *semaphore.Permit) error {
				_, err := p.Verify(ctx)
				return err
			}},
			{"verify as a string", semaphore.VerifyScript.Hash(), "1", func(_ *semaphore.Semaphore, p *semaphore.Permit) error {
				_, err := p.Verify(ctx)
				return err
			}},
			{"release NotOwned", semaphore.ReleaseScript.Hash(), int64(-1), func(_ *semaphore.Semaphore, p *semaphore.Permit) error {
				_, err := p.Release(ctx)
				return err
			}},
			{"read short", semaphore.ReadScript.Hash(), []any{int64(2), int64(1), int64(1), now}, func(s *semaphore.Semaphore, _ *semaphore.Permit) error {
				_, err := s.State(ctx)
				return err
			}},
		}
		for _, c := range cases {
			client := b.Client(t)
			coord, err := coordination.New(client, coordination.WithKeyPrefix(b.Prefix()))
			if err != nil {
				t.Fatal(err)
			}
			s, err := semaphore.New(coord, "bad:"+c.name, 2)
			if err != nil {
				t.Fatal(err)
			}
			warm := mustAcquireN(t, s, 1, time.Minute) // caches the scripts on the key's node
			if _, err := warm.Refresh(ctx, time.Minute); err != nil {
				t.Fatal(err)
			}
			if _, err := s.State(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := warm.Verify(ctx); err != nil {
				t.Fatal(err)
			}
			release(t, warm)
			p := mustAcquireN(t, s, 1, time.Minute)
			client.AddHook(replyHook{sha: c.sha, val: c.val})
			err = c.op(s, p)
			if !errors.Is(err, coordination.ErrBadState) || errors.Is(err, coordination.ErrNotAcquired) {
				t.Errorf("%s: %v; want ErrBadState", c.name, err)
			}
			if c.sha == semaphore.RefreshScript.Hash() || c.sha == semaphore.VerifyScript.Hash() {
				if p.Remaining() == 0 || p.Context().Err() != nil {
					t.Errorf("%s: the permit was marked lost by a reply nobody understood", c.name)
				}
			}
		}
	})
}

// Bad input returns coordination.ErrInvalidArgument naming the argument,
// and nothing is sent to Redis.
func TestInvalidArguments(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		coord := b.Coordinator(t)
		s := newSem(t, coord, 3)
		p := mustAcquireN(t, s, 1, time.Minute)
		counter := testharness.CountCommands(coord.Client())

		_, err := semaphore.New(nil, key, 1)
		wantArgument(t, err, "coord")
		_, err = semaphore.New(coord, "", 1)
		wantArgument(t, err, "key")
		for _, c := range []int64{0, -1, semaphore.MaxCapacity + 1} {
			_, err = semaphore.New(coord, key, c)
			wantArgument(t, err, "capacity")
		}
		_, err = semaphore.New(coord, key, 1, semaphore.WithRecheck(0))
		wantArgument(t, err, "recheck")
		for _, n := range []int64{0, -1, 4} {
			_, err = s.TryAcquireN(ctx, n, time.Minute)
			wantArgument(t, err, "n")
			_, err = s.AcquireN(ctx, n, time.Minute)
			wantArgument(t, err, "n")
		}
		for _, ttl := range []time.Duration{-time.Second, -1, time.Microsecond, 999 * time.Microsecond} {
			_, err = s.TryAcquire(ctx, ttl)
			wantArgument(t, err, "ttl")
			_, err = s.Acquire(ctx, ttl)
			wantArgument(t, err, "ttl")
			_, err = p.Refresh(ctx, ttl)
			wantArgument(t, err, "ttl")
		}
		var nilSem *semaphore.Semaphore
		_, err = nilSem.TryAcquire(ctx, time.Minute)
		wantArgument(t, err, "semaphore")
		_, err = nilSem.State(ctx)
		wantArgument(t, err, "semaphore")
		if n := counter.Count(); n != 0 {
			t.Fatalf("bad input sent %d commands %v; want none", n, counter.Names())
		}
		release(t, p)
	})
}

func wantArgument(t testing.TB, err error, name string) {
	t.Helper()
	if got, ok := check.ArgumentName(err); !errors.Is(err, coordination.ErrInvalidArgument) || !ok || got != name {
		t.Fatalf("err = %v; want an invalid-argument error naming %q", err, name)
	}
}

// Each hot-path operation is one command (EVALSHA) once the scripts are
// cached.
func TestOneCommandPerOperation(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		coord := b.Coordinator(t)
		client := coord.Client()
		// SCRIPT LOAD as the default user: it is not the library's to send.
		admin, err := coordination.New(testharness.AdminOf(t, client))
		if err != nil {
			t.Fatal(err)
		}
		e, _ := engine.Of(admin)
		for _, load := range []func(context.Context, *engine.Engine) error{
			semaphore.AcquireScript.Load, semaphore.ReleaseScript.Load, semaphore.RefreshScript.Load,
			semaphore.VerifyScript.Load, semaphore.ReadScript.Load,
		} {
			if err := load(ctx, e); err != nil {
				t.Fatalf("SCRIPT LOAD: %v", err)
			}
		}
		s := newSem(t, coord, 1)
		testharness.Connect(t, client)
		counter := testharness.CountCommands(client)
		one := func(what string, op func() error) { t.Helper(); counter.ExpectOne(t, what, op) }
		var p *semaphore.Permit
		one("TryAcquire", func() (err error) { p, err = s.TryAcquire(ctx, time.Minute); return err })
		one("contended TryAcquire", func() error {
			if _, err := s.TryAcquire(ctx, time.Minute); !errors.Is(err, coordination.ErrNotAcquired) {
				return errors.New("not refused")
			}
			return nil
		})
		one("Refresh", func() error { _, err := p.Refresh(ctx, time.Minute); return err })
		one("Verify", func() error { _, err := p.Verify(ctx); return err })
		one("State", func() error { _, err := s.State(ctx); return err })
		one("Release", func() error { _, err := p.Release(ctx); return err })
		one("uncontended Acquire", func() (err error) { p, err = s.Acquire(ctx, time.Minute); return err })
		one("Release", func() error { _, err := p.Release(ctx); return err })
	})
}

// Every public operation is admitted once under its name (contention is
// Succeeded); a rejecting hook stops the operation before Redis.
func TestHooks(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		rec := &testharness.HookRecorder{}
		coord := b.Coordinator(t, coordination.WithHooks(rec))
		s := newSem(t, coord, 1)
		p := mustAcquireN(t, s, 1, time.Minute)
		_, _ = s.TryAcquire(ctx, time.Minute) // contended
		_, _ = p.Refresh(ctx, time.Minute)
		_, _ = p.Verify(ctx)
		_, _ = s.State(ctx)

		rejected := errors.New("rejected by test")
		rec.Reject(rejected)
		counter := testharness.CountCommands(coord.Client())
		if _, err := s.TryAcquire(ctx, time.Minute); !errors.Is(err, rejected) {
			t.Fatalf("TryAcquire under a rejecting hook: %v", err)
		}
		if out, err := p.Release(ctx); !errors.Is(err, rejected) || out != 0 {
			t.Fatalf("Release under a rejecting hook: %v, %v", out, err)
		}
		if p.Remaining() == 0 {
			t.Fatalf("a rejected Release changed the permit")
		}
		if n := counter.Count(); n != 0 {
			t.Fatalf("rejected operations sent %v", counter.Names())
		}
		rec.Reject(nil)
		release(t, p)

		want := []string{
			"semaphore:SEMAPHORE ACQUIRE:succeeded", "semaphore:SEMAPHORE ACQUIRE:succeeded",
			"semaphore:SEMAPHORE RENEW:succeeded", "semaphore:SEMAPHORE VERIFY:succeeded",
			"semaphore:SEMAPHORE READ:succeeded", "semaphore:SEMAPHORE RELEASE:succeeded",
		}
		if got := rec.Ops(); !slices.Equal(got, want) {
			t.Fatalf("admitted %v\nwant %v", got, want)
		}
	})
}

// A release that fails before reaching Redis (a cancelled context) marks
// the permit released at once (the one release semantics: context cause
// ErrReleased, a second Release answers AlreadyReleased without asking
// Redis), returns the error, and is retried in the background until the
// permit is gone.
func TestFailedReleaseIsCleanedUpInBackground(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		raw := b.Raw(t)
		coord := b.Coordinator(t)
		s := newSem(t, coord, 1)
		p := mustAcquireN(t, s, 1, time.Minute)
		cancelled, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := p.Release(cancelled); !errors.Is(err, context.Canceled) {
			t.Fatalf("Release with a cancelled context: %v", err)
		}
		if !errors.Is(context.Cause(p.Context()), coordination.ErrReleased) || p.Remaining() != 0 {
			t.Fatalf("after a failed release: cause %v, remaining %v; want released", context.Cause(p.Context()), p.Remaining())
		}
		eventually(t, 5*time.Second, "background release", func() bool {
			n, _ := raw.Exists(context.Background(), b.Key(key)).Result()
			return n == 0
		})
		// Counted once the background retry is done: the second Release
		// must send nothing.
		counter := testharness.CountCommands(coord.Client())
		if out, err := p.Release(context.Background()); out != coordination.AlreadyReleased || err != nil {
			t.Fatalf("second Release = %v, %v; want AlreadyReleased", out, err)
		}
		if n := counter.Count(); n != 0 {
			t.Errorf("second Release sent %v", counter.Names())
		}
	})
}

// noPerm is a terminal error reply, as a server whose ACL denies a command
// the script runs would give.
type noPerm string

func (e noPerm) Error() string { return string(e) }
func (e noPerm) RedisError()   {}

// A background release that cannot succeed is abandoned and counted in
// coordination.cleanup.abandoned; the permit then ends at its TTL. A
// release that fails terminally itself starts no background retry.
func TestAbandonedCleanupIsCounted(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Raw(t)
		mp := newMeterProvider()
		client := b.Client(t)
		faults := &testharness.ScriptFaults{}
		client.AddHook(faults)
		coord, err := coordination.New(client, coordination.WithKeyPrefix(b.Prefix()), coordination.WithMeterProvider(mp))
		if err != nil {
			t.Fatal(err)
		}
		s := newSem(t, coord, 2)
		p := mustAcquireN(t, s, 1, time.Minute)
		// The release fails transiently (never sent); its background retry
		// is refused terminally.
		faults.Add(testharness.Fault{SHA: semaphore.ReleaseScript.Hash(), Err: testharness.LoadingError})
		faults.Add(testharness.Fault{SHA: semaphore.ReleaseScript.Hash(), Err: noPerm("NOPERM this user has no permissions to run the 'zrem' command")})
		if _, err := p.Release(ctx); !coordination.IsTransient(err) {
			t.Fatalf("Release with LOADING: %v, want the transient error", err)
		}
		eventually(t, 5*time.Second, "abandoned cleanup counted", func() bool {
			return mp.count("coordination.cleanup.abandoned", "reason=terminal_error", "stage=release") == 1
		})
		if got := members(t, b, raw); !slices.Equal(got, []string{memberOf(p)}) {
			t.Fatalf("members = %v; want the abandoned permit, left to its TTL", got)
		}

		// A terminal error of the release itself: returned, nothing retried.
		e, _ := engine.Of(coord)
		eventually(t, 5*time.Second, "the abandoned cleanup ended", func() bool { return e.Cleanups() == 0 })
		q := mustAcquireN(t, s, 1, time.Minute)
		faults.Add(testharness.Fault{SHA: semaphore.ReleaseScript.Hash(), Err: noPerm("NOPERM no permissions")})
		if _, err := q.Release(ctx); engine.Classify(err) != engine.Terminal {
			t.Fatalf("Release with NOPERM: %v, want the terminal error", err)
		}
		if !errors.Is(context.Cause(q.Context()), coordination.ErrReleased) {
			t.Fatalf("cause after a terminal release error = %v, want ErrReleased", context.Cause(q.Context()))
		}
		if n := e.Cleanups(); n != 0 {
			t.Fatalf("%d background cleanups after a terminal release error; want none", n)
		}
		if got := members(t, b, raw); len(got) != 2 {
			t.Fatalf("members = %v; want both permits, left to their TTL", got)
		}
		if n := mp.count("coordination.cleanup.abandoned", "reason=terminal_error", "stage=release"); n != 1 {
			t.Fatalf("abandoned count = %d, want still 1", n)
		}
	})
}

// An acquisition whose reply was lost (the script ran, the caller saw a
// timeout) is released in the background by an owner-checked cleanup,
// which leaves a tombstone of its member (no permit).
func TestLostAcquireReplyIsCleanedUp(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Raw(t)
		coord := b.Coordinator(t)
		lost := &testharness.LostReply{}
		coord.Client().AddHook(lost)
		s := newSem(t, coord, 2)
		lost.Arm()
		p, err := s.TryAcquireN(ctx, 2, time.Minute)
		if p != nil || !errors.Is(err, testharness.ErrLostReply) || !coordination.IsAmbiguous(err) {
			t.Fatalf("TryAcquireN with a lost reply = %v, %v; want the ambiguous error", p, err)
		}
		eventually(t, 5*time.Second, "background release of the acquisition", func() bool {
			ok, err := noPermit(ctx, raw, b.Key(key))
			return err == nil && ok
		})
		p = mustAcquireN(t, s, 2, time.Minute)
		release(t, p)
	})
}

// Keys are binary-safe and carry the coordinator's prefix.
func TestBinaryKeyAndPrefix(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Raw(t)
		const bin = "bin\x00\xff\n key"
		s, err := semaphore.New(b.Coordinator(t), bin, 1)
		if err != nil {
			t.Fatal(err)
		}
		p := mustAcquireN(t, s, 1, time.Minute)
		if n, _ := raw.Exists(ctx, b.Key(bin)).Result(); n != 1 {
			t.Fatalf("the permit is not stored under the prefixed binary key")
		}
		if n, _ := raw.Exists(ctx, bin).Result(); n != 0 {
			t.Fatalf("the permit is stored without the prefix")
		}
		other, err := semaphore.New(b.Coordinator(t), bin, 1)
		if err != nil {
			t.Fatal(err)
		}
		q, err := other.TryAcquire(ctx, time.Minute)
		wantNotAcquired(t, q, err)
		release(t, p)
		if n, _ := raw.Exists(ctx, b.Key(bin)).Result(); n != 0 {
			t.Fatalf("the last release left the binary key")
		}
	})
}

// A key whose TTL an operator removed (PERSIST) while every permit has an
// expiry gets its TTL back from the next acquisition or renewal, so that
// it cannot outlive its permits.
func TestPersistedKeyGetsItsTTLBack(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Raw(t)
		s := newSem(t, b.Coordinator(t), 4)
		ttlAfter := func(what string, f func() error) {
			t.Helper()
			if err := raw.Persist(ctx, b.Key(key)).Err(); err != nil {
				t.Fatal(err)
			}
			if err := f(); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			d, err := raw.PTTL(ctx, b.Key(key)).Result()
			if err != nil || d <= 0 || d > time.Minute {
				t.Fatalf("after PERSIST and %s: PTTL = %v, %v; want the latest permit's (at most 1m)", what, d, err)
			}
		}
		p1, err := s.TryAcquire(ctx, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		// A shorter permit: GT alone would leave the key without a TTL.
		var p2 *semaphore.Permit
		ttlAfter("an acquisition", func() error { p2, err = s.TryAcquire(ctx, 10*time.Second); return err })
		ttlAfter("a renewal", func() error { _, err := p1.Refresh(ctx, 30*time.Second); return err })
		if got := members(t, b, raw); len(got) != 2 {
			t.Fatalf("permits %v, want 2", got)
		}
		ttlAfter("a release", func() error { _, err := p1.Release(ctx); return err })
		if d, err := raw.PTTL(ctx, b.Key(key)).Result(); err != nil || d > 10*time.Second {
			t.Fatalf("PTTL = %v, %v after the release: want the 10s permit's", d, err)
		}
		// The last release deletes the key, records and all.
		if err := raw.Persist(ctx, b.Key(key)).Err(); err != nil {
			t.Fatal(err)
		}
		if out := release(t, p2); out != coordination.Released {
			t.Fatalf("Release: %v", out)
		}
		if n, err := raw.Exists(ctx, b.Key(key)).Result(); err != nil || n != 0 {
			t.Fatalf("the last release left the key (%v %v): %s", n, err, snapshot(t, b, raw))
		}

		// A permit without expiry keeps the key without a TTL: releasing
		// or shortening the others leaves it so.
		low, high := mustAcquireN(t, s, 1, time.Minute), mustAcquireN(t, s, 1, 2*time.Minute)
		forever := mustAcquireN(t, s, 1, time.Minute)
		testharness.PermitWithoutExpiry(t, raw, b.Key(key), memberOf(forever))
		if _, err := high.Refresh(ctx, time.Second); err != nil {
			t.Fatal(err)
		}
		if out := release(t, low); out != coordination.Released {
			t.Fatalf("Release: %v", out)
		}
		if d, err := raw.PTTL(ctx, b.Key(key)).Result(); err != nil || d != -1 {
			t.Fatalf("PTTL = %v, %v beside a permit without expiry: want -1 (none)", d, err)
		}
	})
}
