package idempotency_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/idempotency"
	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

func TestMain(m *testing.M) { testharness.Main(m) }

// fixture is one test's store on one backend.
type fixture struct {
	b     *testharness.Backend
	coord *coordination.Coordinator
	store *idempotency.Store
	raw   redis.UniversalClient
}

func newFixture(t *testing.T, b *testharness.Backend) *fixture {
	t.Helper()
	coord := b.Coordinator(t)
	s, err := idempotency.New(coord)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return &fixture{b: b, coord: coord, store: s, raw: b.Raw(t)}
}

func (f *fixture) begin(t *testing.T, key string, ttl time.Duration, opts ...idempotency.BeginOption) idempotency.Claim {
	t.Helper()
	c, err := f.store.Begin(t.Context(), key, ttl, opts...)
	if err != nil {
		t.Fatalf("Begin(%q): %v", key, err)
	}
	return c
}

func (f *fixture) complete(t *testing.T, key, owner string, result []byte) bool {
	t.Helper()
	ok, err := f.store.Complete(t.Context(), key, owner, result)
	if err != nil {
		t.Fatalf("Complete(%q): %v", key, err)
	}
	return ok
}

func (f *fixture) abandon(t *testing.T, key, owner string) bool {
	t.Helper()
	ok, err := f.store.Abandon(t.Context(), key, owner)
	if err != nil {
		t.Fatalf("Abandon(%q): %v", key, err)
	}
	return ok
}

func (f *fixture) fail(t *testing.T, key, owner string) bool {
	t.Helper()
	ok, err := f.store.Fail(t.Context(), key, owner)
	if err != nil {
		t.Fatalf("Fail(%q): %v", key, err)
	}
	return ok
}

// wantResult checks that Begin finds key completed with result want.
func (f *fixture) wantResult(t *testing.T, key, want string, opts ...idempotency.BeginOption) {
	t.Helper()
	got := f.begin(t, key, time.Minute, opts...)
	wantState(t, got, idempotency.Completed)
	if string(got.Result) != want {
		t.Fatalf("Result = %q, want %q", got.Result, want)
	}
}

// pttl returns the key's remaining TTL as Redis reports it.
func (f *fixture) pttl(t *testing.T, key string) time.Duration {
	t.Helper()
	d, err := f.raw.PTTL(t.Context(), f.b.Key(key)).Result()
	if err != nil {
		t.Fatalf("PTTL: %v", err)
	}
	return d
}

func (f *fixture) exists(t *testing.T, key string) bool {
	t.Helper()
	v, err := f.raw.Get(t.Context(), f.b.Key(key)).Result()
	if errors.Is(err, redis.Nil) {
		return false
	}
	if err != nil {
		t.Fatalf("GET: %v", err)
	}
	return !strings.HasPrefix(v, "A") // an abandoned claim is a free key
}

func wantState(t *testing.T, c idempotency.Claim, want idempotency.State) {
	t.Helper()
	if c.State != want {
		t.Fatalf("state = %v, want %v (claim %+v)", c.State, want, c)
	}
	switch want {
	case idempotency.Started:
		if len(c.Owner) != 22 || c.Fence < 3 || c.Result != nil || c.Remaining != 0 {
			t.Fatalf("started claim = %+v, want a 22-character owner, a fence and nothing else", c)
		}
	case idempotency.Completed:
		if c.Owner != "" || c.Fence != 0 || c.Result == nil || c.Remaining != 0 {
			t.Fatalf("completed claim = %+v, want a non-nil result and nothing else", c)
		}
	case idempotency.InProgress:
		if c.Owner != "" || c.Fence != 0 || c.Result != nil || c.Remaining <= 0 {
			t.Fatalf("in-progress claim = %+v, want a positive Remaining and nothing else", c)
		}
	case idempotency.Failed:
		if c.Owner != "" || c.Fence != 0 || c.Result != nil || c.Remaining <= 0 {
			t.Fatalf("failed claim = %+v, want a positive Remaining and nothing else", c)
		}
	case idempotency.FingerprintMismatch:
		if c.Owner != "" || c.Fence != 0 || c.Result != nil || c.Remaining != 0 {
			t.Fatalf("mismatch claim = %+v, want no owner, result or remaining", c)
		}
	}
}

func TestBeginStartedThenInProgressThenCompleted(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		f := newFixture(t, b)
		first := f.begin(t, "order-1", time.Minute)
		wantState(t, first, idempotency.Started)
		second := f.begin(t, "order-1", time.Minute)
		wantState(t, second, idempotency.InProgress)
		if second.Remaining > time.Minute {
			t.Fatalf("Remaining = %v, want <= 1m", second.Remaining)
		}
		if !f.complete(t, "order-1", first.Owner, []byte("invoice-456")) {
			t.Fatal("Complete by the owner = false, want true")
		}
		third := f.begin(t, "order-1", time.Minute)
		wantState(t, third, idempotency.Completed)
		third.Result[0] = 'X' // the result is the caller's own copy
		f.wantResult(t, "order-1", "invoice-456")
	})
}

func TestResultsRoundTripExactly(t *testing.T) {
	big := make([]byte, 256<<10)
	for i := range big {
		big[i] = byte(i * 7)
	}
	cases := []struct {
		name   string
		result []byte
		want   []byte
	}{
		{"text", []byte("ok"), []byte("ok")},
		{"empty", []byte{}, []byte{}},
		{"nil is empty", nil, []byte{}},
		{"zero bytes", []byte{0, 0, 0}, []byte{0, 0, 0}},
		{"binary", []byte{0xff, 0x00, 0xfe, '\r', '\n', 0x80, 0}, []byte{0xff, 0x00, 0xfe, '\r', '\n', 0x80, 0}},
		{"invalid utf8", []byte("\xc3\x28\xa0\xa1"), []byte("\xc3\x28\xa0\xa1")},
		{"256KiB", big, big},
	}
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		f := newFixture(t, b)
		for _, tc := range cases {
			key := "result:" + tc.name
			c := f.begin(t, key, time.Minute)
			wantState(t, c, idempotency.Started)
			in := bytes.Clone(tc.result)
			if !f.complete(t, key, c.Owner, in) {
				t.Fatalf("%s: Complete = false", tc.name)
			}
			if len(in) > 0 {
				in[0]++ // the store must not keep the caller's slice
			}
			got := f.begin(t, key, time.Minute)
			wantState(t, got, idempotency.Completed)
			if !bytes.Equal(got.Result, tc.want) || len(got.Result) != len(tc.want) {
				t.Fatalf("%s: Result = %q (%d bytes), want %q (%d bytes)", tc.name, got.Result, len(got.Result), tc.want, len(tc.want))
			}
		}
	})
}

func TestFingerprints(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		f := newFixture(t, b)
		fp := idempotency.WithFingerprint
		c := f.begin(t, "k", time.Minute, fp("sha-a"))
		wantState(t, c, idempotency.Started)
		wantState(t, f.begin(t, "k", time.Minute, fp("sha-b")), idempotency.FingerprintMismatch)
		wantState(t, f.begin(t, "k", time.Minute, fp("sha-a")), idempotency.InProgress)
		if !f.complete(t, "k", c.Owner, []byte("secret result")) {
			t.Fatal("Complete = false")
		}
		wantState(t, f.begin(t, "k", time.Minute, fp("sha-b")), idempotency.FingerprintMismatch)
		wantState(t, f.begin(t, "k", time.Minute), idempotency.FingerprintMismatch) // absent differs from present
		f.wantResult(t, "k", "secret result", fp("sha-a"))

		// No fingerprint differs from an empty fingerprint, both ways.
		wantState(t, f.begin(t, "absent", time.Minute), idempotency.Started)
		wantState(t, f.begin(t, "absent", time.Minute, fp("")), idempotency.FingerprintMismatch)
		wantState(t, f.begin(t, "absent", time.Minute), idempotency.InProgress)
		wantState(t, f.begin(t, "empty", time.Minute, fp("")), idempotency.Started)
		wantState(t, f.begin(t, "empty", time.Minute), idempotency.FingerprintMismatch)
		wantState(t, f.begin(t, "empty", time.Minute, fp("")), idempotency.InProgress)

		// Fingerprints are binary-safe.
		wantState(t, f.begin(t, "bin", time.Minute, fp("\x00\xff")), idempotency.Started)
		wantState(t, f.begin(t, "bin", time.Minute, fp("\x00\xfe")), idempotency.FingerprintMismatch)
		wantState(t, f.begin(t, "bin", time.Minute, fp("\x00")), idempotency.FingerprintMismatch)
		wantState(t, f.begin(t, "bin", time.Minute, fp("\x00\xff")), idempotency.InProgress)
	})
}

func TestCompleteOwnership(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		f := newFixture(t, b)
		c := f.begin(t, "k", time.Minute)
		if f.complete(t, "k", "not-the-owner", []byte("forged")) {
			t.Fatal("Complete by a wrong owner = true")
		}
		wantState(t, f.begin(t, "k", time.Minute), idempotency.InProgress)
		if f.complete(t, "missing", c.Owner, []byte("x")) {
			t.Fatal("Complete of a key never claimed = true")
		}
		if f.exists(t, "missing") {
			t.Fatal("Complete of a missing claim created a key")
		}
		if !f.complete(t, "k", c.Owner, []byte("first")) {
			t.Fatal("Complete by the owner = false")
		}
		if f.complete(t, "k", c.Owner, []byte("second")) {
			t.Fatal("second Complete by the owner = true")
		}
		if f.complete(t, "k", "not-the-owner", []byte("forged")) {
			t.Fatal("Complete by a wrong owner after completion = true")
		}
		f.wantResult(t, "k", "first")
	})
}

func TestAbandon(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		f := newFixture(t, b)
		c := f.begin(t, "k", time.Minute)
		if f.abandon(t, "k", "not-the-owner") {
			t.Fatal("Abandon by a wrong owner = true")
		}
		wantState(t, f.begin(t, "k", time.Minute), idempotency.InProgress)
		if !f.abandon(t, "k", c.Owner) {
			t.Fatal("Abandon by the owner = false")
		}
		if f.exists(t, "k") {
			t.Fatal("key still exists after Abandon")
		}
		if f.abandon(t, "k", c.Owner) {
			t.Fatal("second Abandon = true")
		}
		if f.complete(t, "k", c.Owner, []byte("late")) {
			t.Fatal("Complete after Abandon = true")
		}
		next := f.begin(t, "k", time.Minute)
		wantState(t, next, idempotency.Started)
		if next.Owner == c.Owner {
			t.Fatal("a new claim reused the abandoned owner token")
		}
		if !f.complete(t, "k", next.Owner, []byte("done")) {
			t.Fatal("Complete = false")
		}
		if f.abandon(t, "k", next.Owner) {
			t.Fatal("Abandon of a completed claim = true")
		}
		f.wantResult(t, "k", "done")
		if f.abandon(t, "never", c.Owner) {
			t.Fatal("Abandon of a key never claimed = true")
		}
	})
}

func TestPendingClaimExpiresAndIsTakenOver(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		f := newFixture(t, b)
		old := f.begin(t, "k", 40*time.Millisecond)
		wantState(t, old, idempotency.Started)
		b.Advance(60 * time.Millisecond)
		if f.exists(t, "k") {
			t.Fatal("pending claim did not expire after its ttl")
		}
		next := f.begin(t, "k", time.Minute)
		wantState(t, next, idempotency.Started)
		if next.Owner == old.Owner {
			t.Fatal("takeover kept the old owner token")
		}
		if f.complete(t, "k", old.Owner, []byte("stale")) {
			t.Fatal("the expired owner completed the new claim")
		}
		if f.abandon(t, "k", old.Owner) {
			t.Fatal("the expired owner abandoned the new claim")
		}
		wantState(t, f.begin(t, "k", time.Minute), idempotency.InProgress)
		if !f.complete(t, "k", next.Owner, []byte("fresh")) {
			t.Fatal("the new owner could not complete")
		}
		f.wantResult(t, "k", "fresh")
	})
}

func TestLookupsDoNotRefreshExpiry(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		f := newFixture(t, b)
		const ttl = 2 * time.Second // long enough for the lookups on a loaded machine
		c := f.begin(t, "pending", ttl, idempotency.WithFingerprint("a"))
		b.Advance(time.Second)
		// Lookups of every kind, with longer and shorter ttls: none may
		// touch the claim's TTL.
		wantState(t, f.begin(t, "pending", time.Hour, idempotency.WithFingerprint("a")), idempotency.InProgress)
		wantState(t, f.begin(t, "pending", time.Millisecond, idempotency.WithFingerprint("a")), idempotency.InProgress)
		wantState(t, f.begin(t, "pending", time.Hour, idempotency.WithFingerprint("b")), idempotency.FingerprintMismatch)
		wantState(t, f.begin(t, "pending", time.Hour, idempotency.WithFingerprint("a"),
			idempotency.WithResultTTL(time.Hour)), idempotency.InProgress)
		if got := f.pttl(t, "pending"); got <= 0 || got > ttl-time.Second {
			t.Fatalf("PTTL after lookups = %v, want in (0, %v]", got, ttl-time.Second)
		}
		b.Advance(1100 * time.Millisecond)
		if f.exists(t, "pending") {
			t.Fatal("the claim outlived its ttl: a lookup refreshed it")
		}
		if f.complete(t, "pending", c.Owner, []byte("late")) {
			t.Fatal("Complete after expiry = true")
		}

		// Completed results too: lookups never extend the result TTL, and a
		// loser's WithResultTTL is not recorded.
		c = f.begin(t, "done", ttl)
		wantState(t, f.begin(t, "done", time.Hour, idempotency.WithResultTTL(time.Hour)), idempotency.InProgress)
		if !f.complete(t, "done", c.Owner, []byte("r")) {
			t.Fatal("Complete = false")
		}
		if got := f.pttl(t, "done"); got <= 0 || got > ttl {
			t.Fatalf("PTTL after Complete = %v, want in (0, %v] (the winner's result ttl)", got, ttl)
		}
		b.Advance(time.Second)
		wantState(t, f.begin(t, "done", time.Hour), idempotency.Completed)
		wantState(t, f.begin(t, "done", time.Hour, idempotency.WithFingerprint("x")), idempotency.FingerprintMismatch)
		if got := f.pttl(t, "done"); got <= 0 || got > ttl-time.Second {
			t.Fatalf("PTTL after completed lookups = %v, want in (0, %v]", got, ttl-time.Second)
		}
		b.Advance(1100 * time.Millisecond)
		wantState(t, f.begin(t, "done", time.Minute), idempotency.Started)
	})
}

func TestCompleteRestartsTTL(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		f := newFixture(t, b)
		// Seconds, not milliseconds: on a loaded machine the PTTL read
		// after Complete came 100 ms late (94 ms left of 200).
		const ttl = 2 * time.Second
		c := f.begin(t, "k", ttl)
		b.Advance(1500 * time.Millisecond)
		if !f.complete(t, "k", c.Owner, []byte("r")) {
			t.Fatal("Complete = false")
		}
		// Restarted: more left than the 500 ms the pending claim had.
		if got := f.pttl(t, "k"); got <= time.Second || got > ttl {
			t.Fatalf("PTTL after Complete = %v, want in (1s, %v]", got, ttl)
		}
		b.Advance(time.Second) // past the pending claim's original expiry
		wantState(t, f.begin(t, "k", ttl), idempotency.Completed)

		// WithResultTTL: a short pending claim, a long-lived result.
		c = f.begin(t, "long", 5*time.Second, idempotency.WithResultTTL(time.Hour))
		if got := f.pttl(t, "long"); got <= 0 || got > 5*time.Second {
			t.Fatalf("pending PTTL = %v, want in (0, 5s]", got)
		}
		if !f.complete(t, "long", c.Owner, []byte("r")) {
			t.Fatal("Complete = false")
		}
		if got := f.pttl(t, "long"); got <= time.Hour-time.Minute || got > time.Hour {
			t.Fatalf("result PTTL = %v, want about 1h", got)
		}
	})
}

func TestConcurrentBeginStartsOnce(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		f := newFixture(t, b)
		states := beginMany(t, f, "fresh", 50, time.Minute)
		if states[idempotency.Started] != 1 || states[idempotency.InProgress] != 49 {
			t.Fatalf("50 concurrent Begins on a fresh key: %v, want 1 started and 49 in progress", states)
		}
	})
}

func TestTakeoverRace(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		f := newFixture(t, b)
		old := f.begin(t, "k", 30*time.Millisecond)
		b.Advance(50 * time.Millisecond)
		var (
			mu      sync.Mutex
			winners []string
		)
		states := beginManyFunc(t, f, "k", 50, time.Minute, func(c idempotency.Claim) {
			if c.State == idempotency.Started {
				mu.Lock()
				winners = append(winners, c.Owner)
				mu.Unlock()
			}
		})
		if states[idempotency.Started] != 1 || states[idempotency.InProgress] != 49 {
			t.Fatalf("50 Begins on an expired claim: %v, want exactly 1 started and 49 in progress", states)
		}
		if winners[0] == old.Owner {
			t.Fatal("the winner got the expired owner's token")
		}
		if f.complete(t, "k", old.Owner, []byte("stale")) {
			t.Fatal("the expired owner's Complete = true")
		}
		if !f.complete(t, "k", winners[0], []byte("winner")) {
			t.Fatal("the winner's Complete = false")
		}
		f.wantResult(t, "k", "winner")
	})
}

func beginMany(t *testing.T, f *fixture, key string, n int, ttl time.Duration) map[idempotency.State]int {
	return beginManyFunc(t, f, key, n, ttl, nil)
}

// beginManyFunc runs n Begins at once (released together) and counts the
// states they got.
func beginManyFunc(t *testing.T, f *fixture, key string, n int, ttl time.Duration, each func(idempotency.Claim)) map[idempotency.State]int {
	t.Helper()
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		states = map[idempotency.State]int{}
		errs   []error
		start  = make(chan struct{})
	)
	for range n {
		wg.Go(func() {
			<-start
			c, err := f.store.Begin(t.Context(), key, ttl)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			states[c.State]++
			if each != nil {
				each(c)
			}
		})
	}
	close(start)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d Begins failed, first: %v", len(errs), errs[0])
	}
	return states
}

func TestOneCommandPerOperation(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		f := newFixture(t, b)
		client := f.coord.Client()
		warmScripts(t, f.coord)
		counter := testharness.CountCommands(client)
		expectOne := func(what string, op func()) {
			t.Helper()
			counter.Reset()
			op()
			if got := counter.Names(); len(got) != 1 || got[0] != "EVALSHA" {
				t.Fatalf("%s sent %v, want exactly [EVALSHA]", what, got)
			}
		}
		var c idempotency.Claim
		expectOne("Begin (started)", func() { c = f.begin(t, "k", time.Minute, idempotency.WithFingerprint("x")) })
		expectOne("Begin (in progress)", func() { f.begin(t, "k", time.Minute, idempotency.WithFingerprint("x")) })
		expectOne("Begin (mismatch)", func() { f.begin(t, "k", time.Minute) })
		expectOne("Complete", func() { f.complete(t, "k", c.Owner, []byte("r")) })
		expectOne("Begin (completed)", func() { f.begin(t, "k", time.Minute, idempotency.WithFingerprint("x")) })
		expectOne("Complete (refused)", func() { f.complete(t, "k", c.Owner, []byte("r")) })
		c = f.begin(t, "a", time.Minute)
		expectOne("Abandon", func() { f.abandon(t, "a", c.Owner) })
		expectOne("Abandon (nothing)", func() { f.abandon(t, "a", c.Owner) })
		c = f.begin(t, "f", time.Minute)
		expectOne("Fail", func() { f.fail(t, "f", c.Owner) })
		expectOne("Begin (failed)", func() { f.begin(t, "f", time.Minute) })
		expectOne("Fail (nothing)", func() { f.fail(t, "f", c.Owner) })
	})
}

func TestInvalidArgumentsSendNothing(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		f := newFixture(t, b)
		counter := testharness.CountCommands(f.coord.Client())
		ctx := t.Context()
		var nilStore *idempotency.Store
		fn := func(context.Context) ([]byte, error) { return nil, nil }
		cases := []struct {
			arg string
			err error
		}{
			{"key", second(f.store.Begin(ctx, "", time.Minute))},
			{"ttl", second(f.store.Begin(ctx, "k", 0))},
			{"ttl", second(f.store.Begin(ctx, "k", time.Millisecond-1))},
			{"ttl", second(f.store.Begin(ctx, "k", -time.Second))},
			{"resultTTL", second(f.store.Begin(ctx, "k", time.Minute, idempotency.WithResultTTL(time.Microsecond)))},
			{"wait", second(f.store.Begin(ctx, "k", time.Minute, idempotency.WithWait(-time.Second)))},
			{"store", second(nilStore.Begin(ctx, "k", time.Minute))},
			{"key", second(f.store.Complete(ctx, "", "owner", nil))},
			{"owner", second(f.store.Complete(ctx, "k", "", nil))},
			{"store", second(nilStore.Complete(ctx, "k", "owner", nil))},
			{"key", second(f.store.Abandon(ctx, "", "owner"))},
			{"owner", second(f.store.Abandon(ctx, "k", ""))},
			{"store", second(nilStore.Abandon(ctx, "k", "owner"))},
			{"key", second(f.store.Fail(ctx, "", "owner"))},
			{"owner", second(f.store.Fail(ctx, "k", ""))},
			{"store", second(nilStore.Fail(ctx, "k", "owner"))},
			{"fn", third(f.store.Do(ctx, "k", time.Minute, "", nil))},
			{"ttl", third(f.store.Do(ctx, "k", 0, "", fn))},
			{"key", third(f.store.Do(ctx, "", time.Minute, "", fn))},
			{"store", third(nilStore.Do(ctx, "k", time.Minute, "", fn))},
			{"coord", second(idempotency.New(nil))},
			{"store", second(idempotency.NewMiddleware(nil))},
		}
		for i, tc := range cases {
			if name, ok := check.ArgumentName(tc.err); !errors.Is(tc.err, coordination.ErrInvalidArgument) || !ok || name != tc.arg {
				t.Errorf("case %d: err = %v, want an invalid-argument error naming %q", i, tc.err, tc.arg)
			}
		}
		if n := counter.Count(); n != 0 {
			t.Fatalf("bad input sent %d commands (%v), want none", n, counter.Names())
		}
		// Sub-millisecond parts round up, never down: 1.5 ms is accepted.
		if c := f.begin(t, "rounded", 1500*time.Microsecond); c.State != idempotency.Started {
			t.Fatalf("ttl 1.5ms: %v", c.State)
		}
	})
}

func second[T any](_ T, err error) error { return err }

func third[T, U any](_ T, _ U, err error) error { return err }

func TestForeignValuesAreRejectedUnchanged(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		f := newFixture(t, b)
		ctx := t.Context()
		// Another type, such as a claim of an earlier version (a hash).
		old := []any{"state", "completed", "owner", "o", "ttl", "100", "result", "r", "done", "d"}
		if err := f.raw.HSet(ctx, b.Key("hash"), old...).Err(); err != nil {
			t.Fatal(err)
		}
		_, err := f.store.Begin(ctx, "hash", time.Minute)
		if !errors.Is(err, coordination.ErrBadState) || !strings.Contains(err.Error(), "wrong Redis type") {
			t.Fatalf("Begin on a hash: %v, want ErrBadState (wrong Redis type)", err)
		}
		_, err = f.store.Complete(ctx, "hash", "o", []byte("r"))
		if !errors.Is(err, coordination.ErrBadState) {
			t.Fatalf("Complete on a hash: %v, want ErrBadState (wrong type)", err)
		}
		_, err = f.store.Abandon(ctx, "hash", "o")
		if !errors.Is(err, coordination.ErrBadState) {
			t.Fatalf("Abandon on a hash: %v, want ErrBadState (wrong type)", err)
		}
		if got := f.raw.HGetAll(ctx, b.Key("hash")).Val(); len(got) != len(old)/2 || got["result"] != "r" {
			t.Fatalf("hash changed to %v", got)
		}

		// Strings this package did not write: each operation either refuses
		// with ErrBadState or (when what it reads is sound) answers without
		// writing. Nothing changes either way.
		bad := []struct {
			name, value                 string
			begin, complete, abandonBad bool
		}{
			{"empty", "", true, true, true},
			{"unknown state", "X100:1:o:-:", true, true, true},
			{"no owner", "P100:1:", true, true, true},
			{"no fence", "P100:o:-:", true, true, true},
			{"bad ttl", "P-5:1:o:-:", true, true, false},
			{"huge ttl", "P1234567890123456:1:o:-:", true, true, false},
			{"no completion id", "C:-:r", true, true, true},
			{"abandoned without a fence", "Ax:id", true, false, false},
		}
		for _, tc := range bad {
			key := "bad:" + tc.name
			if err := f.raw.Set(ctx, b.Key(key), tc.value, time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
			check := func(op string, err error, wantBad bool) {
				t.Helper()
				if wantBad != errors.Is(err, coordination.ErrBadState) || (!wantBad && err != nil) {
					t.Errorf("%s: %s err = %v, want ErrBadState: %v", tc.name, op, err, wantBad)
				}
			}
			check("Begin", second(f.store.Begin(ctx, key, time.Minute)), tc.begin)
			check("Complete", second(f.store.Complete(ctx, key, "x", []byte("r"))), tc.complete)
			check("Abandon", second(f.store.Abandon(ctx, key, "x")), tc.abandonBad)
			if after := f.raw.Get(ctx, b.Key(key)).Val(); after != tc.value {
				t.Errorf("%s: value changed from %q to %q", tc.name, tc.value, after)
			}
		}

		// A pending claim that never expires would block its key forever.
		if err := f.raw.Set(ctx, b.Key("forever"), "P100:1:o:-:", 0).Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := f.store.Begin(ctx, "forever", time.Minute); !errors.Is(err, coordination.ErrBadState) {
			t.Fatalf("Begin on a pending claim without TTL: %v, want ErrBadState", err)
		}
	})
}
