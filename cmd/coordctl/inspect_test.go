package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/fencing"
	"github.com/coordkit/coordination/idempotency"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/fencingcore"
	"github.com/coordkit/coordination/internal/layout"
	"github.com/coordkit/coordination/internal/lockcore"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/latch"
	"github.com/coordkit/coordination/leader"
	"github.com/coordkit/coordination/lock"
	"github.com/coordkit/coordination/ratelimit"
	"github.com/coordkit/coordination/rwlease"
	"github.com/coordkit/coordination/semaphore"
)

var update = flag.Bool("update", false, "rewrite the golden files of TestInspectGolden")

// layouts writes one key of every layout the library writes, through the
// library, and returns the keys (without the prefix) by golden name. hold
// keeps the holders alive until the test ends.
func layouts(t *testing.T, b *testharness.Backend, coord *coordination.Coordinator) map[string]string {
	t.Helper()
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	keys := map[string]string{}
	plain, err := lock.New(coord, "plain-lock")
	must(err)
	lk, err := plain.TryAcquire(ctx, time.Minute)
	must(err)
	t.Cleanup(func() { _, _ = lk.Release(context.Background()) })
	keys["lock"] = "plain-lock"
	// A lock with a blocked waiter: the value carries the waiter mark.
	waited, err := lock.New(coord, "waited-lock")
	must(err)
	held, err := waited.TryAcquire(ctx, time.Minute)
	must(err)
	t.Cleanup(func() { _, _ = held.Release(context.Background()) })
	waitCtx, stopWaiting := context.WithCancel(ctx)
	waiting := make(chan struct{})
	go func() {
		defer close(waiting)
		if l, err := waited.Acquire(waitCtx, time.Minute); err == nil {
			_, _ = l.Release(context.Background())
		}
	}()
	t.Cleanup(func() { stopWaiting(); <-waiting })
	keys["lock-waited"] = "waited-lock"
	// The tombstone an abandoned acquisition's cleanup leaves: a free lock.
	abandoned, err := lock.New(coord, "abandoned-lock")
	must(err)
	al, err := abandoned.TryAcquire(ctx, time.Minute)
	must(err)
	eng, err := engine.Of(coord)
	must(err)
	_, err = lockcore.Abandon.Run(ctx, eng, eng.Key("abandoned-lock"), al.Token(), int64(time.Minute/time.Millisecond))
	must(err)
	keys["lock-tombstone"] = "abandoned-lock"

	flm, err := fencing.New(coord, "{job}:lock", "{job}:fence", fencing.WithHolder("worker-7"))
	must(err)
	fl, err := flm.TryAcquire(ctx, time.Minute)
	must(err)
	t.Cleanup(func() { _, _ = fl.Release(context.Background()) })
	keys["fencing-lease"] = "{job}:lock"
	// The tombstone an abandoned fencing acquisition's cleanup leaves: a
	// free lease.
	fab, err := fencing.New(coord, "{gone}:lock", "{gone}:fence")
	must(err)
	fal, err := fab.TryAcquire(ctx, time.Minute)
	must(err)
	_, err = fencingcore.Abandon.Run(ctx, eng, eng.Key("{gone}:lock"), fal.Token(), int64(time.Minute/time.Millisecond))
	must(err)
	keys["fencing-tombstone"] = "{gone}:lock"
	// Two acquisitions abandoned close together: a tombstone list.
	for range 2 {
		tok, err := engine.NewToken()
		must(err)
		_, err = fencingcore.Abandon.Run(ctx, eng, eng.Key("{gone2}:lock"), tok, int64(time.Minute/time.Millisecond))
		must(err)
	}
	keys["fencing-tombstones"] = "{gone2}:lock"
	keys["fence-counter"] = "{job}:fence"
	result, err := fencing.NewGuarded(coord, "{job}:result")
	must(err)
	_, _, err = result.Set(ctx, fl.FencingToken(), []byte("done"), 0)
	must(err)
	keys["fenced-value"] = "{job}:result"
	// The README's naming: {K}:lease next to {K}:fence.
	ilm, err := fencing.New(coord, "{invoice:42}:lease", "{invoice:42}:fence")
	must(err)
	il, err := ilm.TryAcquire(ctx, time.Minute)
	must(err)
	t.Cleanup(func() { _, _ = il.Release(context.Background()) })
	keys["fence-counter-lease"] = "{invoice:42}:fence"
	// Another name in the same hash tag: found by the bounded SCAN.
	wlm, err := fencing.New(coord, "{inv:7}:writer", "{inv:7}:fence")
	must(err)
	wl, err := wlm.TryAcquire(ctx, time.Minute)
	must(err)
	t.Cleanup(func() { _, _ = wl.Release(context.Background()) })
	keys["fence-counter-scanned"] = "{inv:7}:fence"
	// A counter whose lease was released (nothing is left at the lease key).
	glm, err := fencing.New(coord, "{inv:1}:lease", "{inv:1}:fence")
	must(err)
	gl, err := glm.TryAcquire(ctx, time.Minute)
	must(err)
	_, err = gl.Release(ctx)
	must(err)
	keys["fence-counter-unheld"] = "{inv:1}:fence"
	// The counters of one slot's names share one hash (issue 24); an
	// earlier layout's counter key, folded in by the next acquisition, is
	// left as a tombstone; one not yet folded is a string of its own.
	keys["fence-counters"] = fencingcore.SharedKeyOf(b.Prefix(), b.Key("{job}:fence"))[len(b.Prefix()):]
	must(b.Raw(t).Set(ctx, b.Key("{old:3}:fence"), "1000", 0).Err())
	olm, err := fencing.New(coord, "{old:3}:lease", "{old:3}:fence")
	must(err)
	ol, err := olm.TryAcquire(ctx, time.Minute)
	must(err)
	_, err = ol.Release(ctx)
	must(err)
	keys["fence-counter-moved"] = "{old:3}:fence"
	must(b.Raw(t).Set(ctx, b.Key("{old:4}:fence"), "41", 0).Err())
	keys["fence-counter-earlier-layout"] = "{old:4}:fence"

	elected := make(chan struct{})
	lctx, stopLeader := context.WithCancel(ctx)
	e, err := leader.New(coord, "{nightly}:leader", "{nightly}:fence", "host-a:42",
		leader.OnElected(func(ctx context.Context, _ *leader.Term) error {
			close(elected)
			<-ctx.Done()
			return nil
		}))
	must(err)
	done := make(chan struct{})
	go func() { defer close(done); _ = e.Run(lctx) }()
	t.Cleanup(func() { stopLeader(); <-done })
	select {
	case <-elected:
	case <-time.After(10 * time.Second):
		t.Fatal("never elected")
	}
	keys["leader"] = "{nightly}:leader"

	if b.HasHashFieldTTL() {
		shards, err := lock.NewFieldSet(coord, "shards")
		must(err)
		for _, f := range []string{"shard:1", "shard:2"} {
			l, err := shards.TryAcquire(ctx, f, time.Minute)
			must(err)
			t.Cleanup(func() { _, _ = l.Release(context.Background()) })
		}
		keys["field-leases"] = "shards"
	}

	rw, err := rwlease.New(coord, "rw")
	must(err)
	for range 2 {
		r, err := rw.TryRead(ctx, time.Minute)
		must(err)
		t.Cleanup(func() { _, _ = r.Release(context.Background()) })
	}
	keys["rwlease-readers"] = "rw"
	rww, err := rwlease.New(coord, "rw-w")
	must(err)
	w, err := rww.TryWrite(ctx, time.Minute)
	must(err)
	t.Cleanup(func() { _, _ = w.Release(context.Background()) })
	keys["rwlease-writer"] = "rw-w"
	// The tombstones an abandoned read and write acquisition's cleanup
	// leave beside a live reader: neither is a holder.
	rwa, err := rwlease.New(coord, "rw-abandoned")
	must(err)
	ra, err := rwa.TryRead(ctx, time.Minute)
	must(err)
	t.Cleanup(func() { _, _ = ra.Release(context.Background()) })
	for _, m := range []string{"R:", "W:"} { // as rwlease_abandon writes them
		tok, err := engine.NewToken()
		must(err)
		must(b.Raw(t).ZAdd(ctx, b.Key("rw-abandoned"), redis.Z{Score: -float64(time.Now().Add(time.Minute).UnixMilli()) - 0.5, Member: m + tok}).Err())
	}
	keys["rwlease-tombstone"] = "rw-abandoned"

	sem, err := semaphore.New(coord, "sem", 5)
	must(err)
	p1, err := sem.TryAcquireN(ctx, 2, time.Minute)
	must(err)
	p2, err := sem.TryAcquire(ctx, time.Minute)
	must(err)
	testharness.PermitWithoutExpiry(t, b.Raw(t), b.Key("sem"), "P:1:"+p2.Token()) // by hand: the library writes none
	t.Cleanup(func() { _, _ = p1.Release(context.Background()); _, _ = p2.Release(context.Background()) })
	keys["semaphore"] = "sem"
	full, err := semaphore.New(coord, "sem-full", 1)
	must(err)
	only, err := full.TryAcquire(ctx, time.Minute)
	must(err)
	t.Cleanup(func() { _, _ = only.Release(context.Background()) })
	go func() {
		if p, err := full.Acquire(waitCtx, time.Minute); err == nil {
			_, _ = p.Release(context.Background())
		}
	}()
	keys["semaphore-waited"] = "sem-full"
	// A capacity set in the key and a drain that gave up with a permit
	// held: the key has no TTL, and the drain stays.
	drained, err := semaphore.New(coord, "sem-drain", 4)
	must(err)
	kept, err := drained.TryAcquire(ctx, time.Minute)
	must(err)
	t.Cleanup(func() { _, _ = kept.Release(context.Background()) })
	must(drained.SetCapacity(ctx, 3))
	dctx, dcancel := context.WithTimeout(ctx, 50*time.Millisecond)
	if err := drained.Drain(dctx); !errors.Is(err, coordination.ErrNotAcquired) {
		t.Fatalf("Drain with a permit held = %v; want ErrNotAcquired", err)
	}
	dcancel()
	keys["semaphore-draining"] = "sem-drain"

	lt, err := latch.New(coord, "latch", latch.WithDeadline(time.Hour))
	must(err)
	_, err = lt.Create(ctx, 3)
	must(err)
	l, err := lt.Join(ctx)
	must(err)
	_, err = l.CountDown(ctx)
	must(err)
	keys["latch"] = "latch"

	st, err := idempotency.New(coord)
	must(err)
	c, err := st.Begin(ctx, "pay:1", time.Minute, idempotency.WithFingerprint("sha256:abc"))
	must(err)
	// A response as the HTTP middleware stores it: version 1, status 201,
	// no headers, the body.
	resp := append(binary.AppendUvarint([]byte{1}, 201), append([]byte{0}, "created"...)...)
	ok, err := st.Complete(ctx, "pay:1", c.Owner, resp)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	keys["claim-completed"] = "pay:1"
	_, err = st.Begin(ctx, "pay:2", time.Minute)
	must(err)
	keys["claim-pending"] = "pay:2"

	for name, mk := range map[string]func(key string) (*ratelimit.Limiter, error){
		"limiter-fixed-window": func(k string) (*ratelimit.Limiter, error) {
			return ratelimit.New(coord, k, ratelimit.FixedWindow{Limit: 10, Window: time.Minute})
		},
		"limiter-fixed-epoch": func(k string) (*ratelimit.Limiter, error) {
			// A week: a one-minute window ended mid-test (CI, 1 run in 4).
			return ratelimit.New(coord, k, ratelimit.FixedWindow{Limit: 10, Window: 7 * 24 * time.Hour, Align: ratelimit.AlignEpoch})
		},
		"limiter-fixed-calendar": func(k string) (*ratelimit.Limiter, error) {
			loc, err := time.LoadLocation("Europe/Berlin")
			if err != nil {
				return nil, err
			}
			return ratelimit.New(coord, k, ratelimit.FixedWindow{Limit: 10, Align: ratelimit.AlignMonth, Location: loc})
		},
		"limiter-sliding-window": func(k string) (*ratelimit.Limiter, error) {
			return ratelimit.New(coord, k, ratelimit.SlidingWindow{Limit: 10, Window: time.Minute, Segments: 6})
		},
		"limiter-token-bucket": func(k string) (*ratelimit.Limiter, error) {
			return ratelimit.New(coord, k, ratelimit.TokenBucket{Limit: 10, TokensPerPeriod: 1, Period: time.Hour})
		},
		"limiter-gcra": func(k string) (*ratelimit.Limiter, error) {
			return ratelimit.New(coord, k, ratelimit.GCRA{Burst: 10, Rate: 1, Period: time.Hour})
		},
		"limiter-throttle": func(k string) (*ratelimit.Limiter, error) {
			return ratelimit.New(coord, k, ratelimit.Throttle{Limit: 3, Quiet: time.Hour})
		},
		"limiter-sliding-log": func(k string) (*ratelimit.Limiter, error) {
			return ratelimit.New(coord, k, ratelimit.SlidingLog{Limit: 5, Window: time.Hour})
		},
		"limiter-composite": func(k string) (*ratelimit.Limiter, error) {
			return ratelimit.New(coord, k, ratelimit.Composite{Components: []ratelimit.Settings{
				ratelimit.FixedWindow{Limit: 10, Window: time.Minute}, ratelimit.GCRA{Burst: 5, Rate: 1, Period: time.Hour}}})
		},
	} {
		lim, err := mk(name)
		must(err)
		t.Cleanup(func() { _ = lim.Close() })
		d, err := lim.Allow(ctx, 3)
		must(err)
		if !d.Allowed() {
			t.Fatalf("%s: not granted", name)
		}
		keys[name] = name
	}
	{
		name := "limiter-concurrency"
		lim, err := ratelimit.NewConcurrency(coord, name, 4, ratelimit.WithLeaseDuration(time.Minute))
		must(err)
		t.Cleanup(func() { _ = lim.Close() })
		lease, err := lim.TryAcquire(ctx, 3)
		must(err)
		t.Cleanup(func() { _, _ = lease.Release(context.Background()) })
		keys[name] = name
		// The tombstone an abandoned acquisition's cleanup leaves beside a
		// lease (ratelimit_conc_abandon): it holds nothing.
		name = "limiter-concurrency-tombstone"
		lim2, err := ratelimit.NewConcurrency(coord, name, 4, ratelimit.WithLeaseDuration(time.Minute))
		must(err)
		t.Cleanup(func() { _ = lim2.Close() })
		lease2, err := lim2.TryAcquire(ctx, 1)
		must(err)
		t.Cleanup(func() { _, _ = lease2.Release(context.Background()) })
		now, err := b.Admin(t).Time(ctx).Result()
		must(err)
		must(b.Admin(t).ZAdd(ctx, b.Key(name), redis.Z{Score: float64(now.Add(time.Minute).UnixMilli()), Member: "0:2:" + lease2.Token() + "x!"}).Err())
		keys[name] = name
	}

	d, err := ratelimit.NewDenyList(coord, "denied")
	must(err)
	must(d.Deny(ctx, "tenant:1"))
	must(d.Deny(ctx, "tenant:2"))
	must(d.DenyFor(ctx, "tenant:3", time.Hour))
	keys["deny-list"] = "denied"
	// The layout before timed denials: a plain set (as SADD writes it).
	must(b.Admin(t).SAdd(ctx, b.Key("denied-set"), "tenant:9").Err())
	keys["deny-list-set"] = "denied-set"

	// An abandoned claim, given a minute (it lasts 5 s, which a loaded
	// machine's run of the inspections below may outlast; the decoded
	// output masks the TTL).
	admin := b.Admin(t)
	ca, err := st.Begin(ctx, "pay:3", time.Minute)
	must(err)
	ok, err = st.Abandon(ctx, "pay:3", ca.Owner)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	must(admin.PExpire(ctx, b.Key("pay:3"), time.Minute).Err())
	keys["claim-abandoned"] = "pay:3"

	raw := b.Client(t)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.HasSuffix(raw.Get(ctx, b.Key("waited-lock")).Val(), "+") || raw.ZScore(ctx, b.Key("sem-full"), "waiting").Err() != nil {
		if time.Now().After(deadline) {
			t.Fatal("the blocked waiters never marked the lock and the semaphore")
		}
		time.Sleep(5 * time.Millisecond)
	}
	return keys
}

var (
	reDur     = regexp.MustCompile(`\b(\d+h)?(\d+m)?\d+(\.\d+)?(ns|µs|ms|s|m|h)\b`)
	reTok     = regexp.MustCompile(`[0-9a-zA-Z_-]{8}…`) // base64url tokens may start with "-"
	reJSONN   = regexp.MustCompile(`"((ttl|expires_in|deadline_in|resets_in|next_refill_in|next_permit_in|full_again_in|run_ends_in|oldest_leaves_in|empty_in)_ms)":-?\d+`)
	reFenceUs = regexp.MustCompile(`\b[0-9]{13,}\b`)                              // an idempotency claim's fence: the server's clock in µs
	reInstant = regexp.MustCompile(`\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z\b`) // a leader term's start
)

// normalize masks what changes from run to run: the test's key prefix,
// random tokens (already truncated), durations and claim fences (clock
// readings).
func normalize(s, prefix string) string {
	s = strings.ReplaceAll(s, prefix, "<prefix>")
	s = reInstant.ReplaceAllString(s, "<instant>")
	s = reFenceUs.ReplaceAllString(s, "<fence>")
	s = reTok.ReplaceAllString(s, "<token>…")
	s = reJSONN.ReplaceAllString(s, `"$1":<ms>`)
	return reDur.ReplaceAllString(s, "<dur>")
}

// inspect decodes every layout the library writes, on every real server
// (standalone and Cluster): compared with testdata/inspect/<layout>.golden
// (go test -run TestInspectGolden -update rewrites them from the first
// backend).
func TestInspectGolden(t *testing.T) {
	wrote := map[string]bool{}
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		coord := b.Coordinator(t)
		keys := layouts(t, b, coord)
		for name, key := range keys {
			var got strings.Builder
			code, out, errOut := runCmd(t, cmdline(b, "inspect", key)...)
			if code != exitOK {
				t.Errorf("inspect %s (%s) = %d\n%s%s", key, name, code, out, errOut)
			}
			got.WriteString(out)
			code, out, _ = runCmd(t, cmdline(b, "inspect", "--json", key)...)
			if code != exitOK || !json.Valid([]byte(out)) {
				t.Errorf("inspect --json %s = %d, invalid JSON %q", key, code, out)
			}
			got.WriteString(out)
			if testing.Verbose() && b.Name == "redis8" {
				t.Logf("$ coordctl inspect %s\n%s", key, got.String()) // the transcript in the report
			}
			// Durations the golden masks, where the value is known.
			if name == "limiter-gcra" && !strings.Contains(got.String(), "next permit in:  0s\n") {
				t.Errorf("GCRA with 7 of 10 left: a permit is free now:\n%s", got.String())
			}
			norm := normalize(got.String(), b.Prefix())
			file := filepath.Join("testdata", "inspect", name+".golden")
			if *update && !wrote[name] {
				wrote[name] = true
				if err := os.WriteFile(file, []byte(norm), 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatalf("%v (run with -update)", err)
			}
			if norm != string(want) {
				t.Errorf("inspect %s on %s:\n%s\nwant (%s):\n%s\nraw:\n%s", key, b.Name, norm, file, want, got.String())
			}
		}
		// --scan lists them all, with their kinds.
		code, out, errOut := runCmd(t, cmdline(b, "inspect", "--scan", "*")...)
		if code != exitOK {
			t.Fatalf("inspect --scan = %d %s", code, errOut)
		}
		for name, key := range keys {
			// A fence counter is a field of its slot's shared counter hash
			// since issue 24, not a key: --scan lists the hash instead.
			if n, err := b.Raw(t).Exists(context.Background(), b.Key(key)).Result(); err == nil && n == 0 && strings.HasSuffix(key, ":fence") {
				key = fencingcore.SharedKeyOf(b.Prefix(), b.Key(key))[len(b.Prefix()):]
			}
			if !strings.Contains(out, shown(b.Prefix()+key)) {
				t.Errorf("--scan lacks %s (%s):\n%s", key, name, out)
			}
		}
		if strings.Contains(out, "CORRUPT") || strings.Contains(out, layout.KindUnknown) {
			t.Errorf("--scan found a corrupt or unknown key among the library's own:\n%s", out)
		}
		// The releases above left nothing behind (no release mark).
		if strings.Contains(out, `\x00released`) {
			t.Errorf("--scan lists a release mark:\n%s", out)
		}
	}, testharness.RealOnly())
}

// Unknown and corrupt layouts: a clear message and exit 1, never a panic.
func TestInspectUnknownAndCorrupt(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		raw := b.Admin(t) // writes other types than the library's
		ctx := context.Background()
		set := func(k string, f func(k string) error) string {
			if err := f(b.Key(k)); err != nil {
				t.Fatal(err)
			}
			return k
		}
		for _, c := range []struct {
			key  string
			want string
		}{
			{set("s", func(k string) error { return raw.Set(ctx, k, "hello", 0).Err() }), "a string of no library layout (5 bytes)"},
			{set("l", func(k string) error { return raw.RPush(ctx, k, "x").Err() }), "a list: no library layout is a list"},
			{set("{c}:fence", func(k string) error { return raw.Set(ctx, k, "7", time.Hour).Err() }), "the counter has a TTL"},
			{set("{c}:lock", func(k string) error { return raw.HSet(ctx, k, "owner", "x").Err() }), "lacks its owner or fence field"},
			{set("latch", func(k string) error { return raw.HSet(ctx, k, "id", "x", "gen", "one").Err() }), "non-numeric"},
			{set("z", func(k string) error { return raw.ZAdd(ctx, k, redis.Z{Score: 1, Member: "m"}).Err() }), "a sorted set of no library layout"},
			{set("sem", func(k string) error { return raw.ZAdd(ctx, k, redis.Z{Score: 1e15, Member: "P:x:tok"}).Err() }), `is not P:<n>:<token>`},
			// Scores no verb reads until it needs them (a release, a TTL
			// restored): inspect reports each.
			{set("sem-far", func(k string) error {
				return raw.ZAdd(ctx, k, redis.Z{Score: -3, Member: "capacity"}, redis.Z{Score: 1e300, Member: "P:1:tok"}).Err()
			}), `permit "P:1:tok" scored 1e+300: not an expiry in whole ms`},
			// Every problem, in one line.
			{set("sem-many", func(k string) error {
				return raw.ZAdd(ctx, k, redis.Z{Score: -3, Member: "capacity"}, redis.Z{Score: -7, Member: "junk"},
					redis.Z{Score: 5, Member: "multi"}).Err()
			}), `member "junk" is not a semaphore member; multi record scored 5`},
			// The key's TTL against its permits.
			{set("sem-inf-ttl", func(k string) error {
				if err := raw.ZAdd(ctx, k, redis.Z{Score: -3, Member: "capacity"}, redis.Z{Score: math.Inf(1), Member: "P:1:tok"}).Err(); err != nil {
					return err
				}
				return raw.Expire(ctx, k, time.Hour).Err()
			}), "a permit without expiry on a key with a TTL: the key's expiry will delete it"},
			{set("sem-no-ttl", func(k string) error {
				return raw.ZAdd(ctx, k, redis.Z{Score: -3, Member: "capacity"}, redis.Z{Score: 4e12, Member: "P:1:tok"}).Err()
			}), "no TTL and no permit without expiry: nothing will delete this key"},
			{set("sem-half", func(k string) error {
				return raw.ZAdd(ctx, k, redis.Z{Score: -3, Member: "capacity"}, redis.Z{Score: 1e12 + 0.5, Member: "P:1:tok"}).Err()
			}), `scored 1000000000000.5: not an expiry in whole ms`},
			{set("sem-below", func(k string) error {
				return raw.ZAdd(ctx, k, redis.Z{Score: -3, Member: "capacity"}, redis.Z{Score: -5, Member: "P:1:tok"}).Err()
			}), `permit "P:1:tok" scored -5`},
			{set("sem-cap", func(k string) error {
				return raw.ZAdd(ctx, k, redis.Z{Score: -2.5, Member: "capacity"}).Err()
			}), "capacity record scored -2.5"},
			// A capacity set in the key: no TTL, and a mode of -1 or -2.
			{set("sem-mode-ttl", func(k string) error {
				if err := raw.ZAdd(ctx, k, redis.Z{Score: -3, Member: "capacity-set"}).Err(); err != nil {
					return err
				}
				return raw.Expire(ctx, k, time.Hour).Err()
			}), "a capacity set in the key on a key with a TTL"},
			{set("sem-mode", func(k string) error {
				return raw.ZAdd(ctx, k, redis.Z{Score: -3, Member: "capacity"}, redis.Z{Score: -3, Member: "capacity-set"},
					redis.Z{Score: 2, Member: "draining"}).Err()
			}), "draining record scored 2: records score below 0 (and above -inf); both a capacity and a capacity-set record"},
			{set("sem-multi", func(k string) error {
				return raw.ZAdd(ctx, k, redis.Z{Score: -3, Member: "capacity"}, redis.Z{Score: 5, Member: "multi"}).Err()
			}), "multi record scored 5: records score below 0"},
			{set("rl", func(k string) error { return raw.Set(ctx, k, "g:1:x|2", time.Hour).Err() }), "GCRA state is not"},
			{set("rl-throttle", func(k string) error { return raw.Set(ctx, k, "t:3:1000|1|9", time.Hour).Err() }), "throttle state is not"},
			{set("rl-log", func(k string) error { return raw.Set(ctx, k, "l:3:1000|2|2|9|9:1,8:1", time.Hour).Err() }), "out of order"},
			{set("rl-log-many", func(k string) error { return raw.Set(ctx, k, "l:1:1000|2|2|9|8:1,9:1", time.Hour).Err() }), "more than its limit"},
			{set("rl-log-header", func(k string) error { return raw.Set(ctx, k, "l:3:1000|3|2|9|8:1,9:1", time.Hour).Err() }), "does not match its entries"},
			{set("rl-throttle-order", func(k string) error { return raw.Set(ctx, k, "t:3:1000|1|9|8", time.Hour).Err() }), "throttle state has a bad number"},
			// An arrival time past 2^53 µs, as a Settle of 2^31 permits
			// once stored (the limiter refuses it: before, inspect showed a
			// negative "next permit in" and exited 0).
			{set("rl-far", func(k string) error {
				return raw.Set(ctx, k, "g:10:6000000:1|12886579780412397|0", time.Hour).Err()
			}), "GCRA state is out of range: tat must be below 2^53 µs and rem below d"},
			{set("claim", func(k string) error { return raw.Set(ctx, k, "P100:123:abc:99:x", time.Hour).Err() }), "a bad fingerprint"},
			{set("claim-nofence", func(k string) error { return raw.Set(ctx, k, "P100:abc:-:", time.Hour).Err() }), "a pending claim without a valid fence"},
			{set("claim-abandoned", func(k string) error { return raw.Set(ctx, k, "A0:x", time.Hour).Err() }), "an abandoned claim without a valid fence"},
			{set("claim-abandoned-nottl", func(k string) error { return raw.Set(ctx, k, "A12:x", 0).Err() }), "an abandoned claim lasts 5 s; this one has no TTL"},
			{set("legacy", func(k string) error {
				return raw.HSet(ctx, k, "state", "completed", "owner", "x", "ttl", "100", "result", "r", "done", "y").Err()
			}), "a claim of the hash layout of earlier releases"},
		} {
			code, out, errOut := runCmd(t, cmdline(b, "inspect", c.key)...)
			if code != exitRefused || !strings.Contains(out, c.want) {
				t.Errorf("inspect %s = %d\n%s%s\nwant 1 and %q", c.key, code, out, errOut, c.want)
			}
		}
		if code, _, errOut := runCmd(t, cmdline(b, "inspect", "--scan", "no-such-*")...); code != exitRefused || !strings.Contains(errOut, "no key matches") {
			t.Errorf("--scan with no match = %d %q", code, errOut)
		}
		// Flags may follow KEY.
		if code, _, errOut := runCmd(t, append([]string{"inspect", "nothing-here"}, connArgs(b)...)...); code != exitRefused || !strings.Contains(errOut, "no such key") {
			t.Errorf("inspect KEY --redis ... = %d %q", code, errOut)
		}
		if code, _, _ := runCmd(t, cmdline(b, "inspect")...); code != exitUsage {
			t.Errorf("inspect without KEY = %d, want 2", code)
		}
	})
}

// decode never panics, whatever a key holds (corrupt layouts, hostile
// values), and always names a kind.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{"", "f:1:2|3|4|", "f:1:2:e|3|4", "f:1:0:d:Europe/Berlin|3|4", "f:1:0:x:|3|4", "f:1:0:d:|3|4", "s:1:2:3|4|", "b:1:1:1|1|1|", "g:1:1:1|1|1|", "g:1:0:0|1|1|", "t:1:1|1|1", "t:3:1000|3|9|8", "t:1:9223372036854775807|1|1|1", "l:1:1|", "l:2:5|2|2|1|1:1,0:1", "l:1:1|1|1|1|1:1:1,", "l:1:1|x|1|1|1:1", "P1:a:-:", "C" + strings.Repeat("a", 36) + ":3:abc{\"status\":200}",
		"01234567-89ab-cdef-0123-456789abcdef+", "9223372036854775808", "-1", "{",
		"P60000:1712345678901234:tok:-:", "P60000:1712345678901234:tok:3:abc", "P60000:0:tok:-:", "P1:2:", "P1:2:3",
		"A1712345678901234:0b9e3c1e-52f1-4a3c-9d6e-2b1f5c7e8a90", "A0:", "A:", "A12",
		"P:2:tok", "R:tok", "W:", "P:x:",
		// A fingerprint length near 2^63: its end overflowed (a panic).
		"P60000:2:tok:9223372036854775807:x", "C" + strings.Repeat("a", 36) + ":9223372036854775790:x"} {
		f.Add("string", s, int64(-1), "owner", s, "P:1:"+s, 1.5)
	}
	// Keys whose name a layout reads (a leader's lease ends in "}:leader").
	for _, k := range []string{"{nightly}:leader", "p:{7}k", "{job}:lock", "{", "}:leader"} {
		f.Add("string|"+k, "01234567-89ab-cdef-0123-456789abcdef", int64(5000), "shard:1", "01234567-89ab-cdef-0123-456789abcdef", "P:1:x", 1.0)
		f.Add("hash|"+k, "W:x", int64(-1), "owner", "x", "R:x", 1.0)
	}
	f.Add("hash", "", int64(5), "gen", "x", "capacity", -3.0)
	f.Add("zset", "", int64(5), "id", "1", "R:x", -1e308)
	f.Add("zset", "", int64(5), "c", "1", "W:", 1e308)
	f.Fuzz(func(t *testing.T, typ, str string, pttl int64, field, value, member string, score float64) {
		key := "k"
		if i := strings.IndexByte(typ, '|'); i >= 0 { // "<type>|<key>"
			typ, key = typ[:i], typ[i+1:]
		}
		s := &layout.Snapshot{Key: key, Type: typ, PTTL: pttl, NowMs: 1_700_000_000_000, NowUs: 1_700_000_000_000_000,
			Str: str, StrLen: int64(len(str)),
			Hash:    map[string]string{field: value, "fence": value, "count": value, "initial": str, "deadline": value},
			HashTTL: map[string]int64{field: pttl}, HashLen: 5,
			ZSet: []layout.Member{{Member: member, Score: score}, {Member: "capacity", Score: -score}, {Member: "#", Score: score}}, ZCard: 3, SCard: pttl}
		zs := [][]layout.Member{s.ZSet, {{Member: member, Score: score}}, {{Member: "R:" + str, Score: score}, {Member: member, Score: -score}}, {{Member: "#", Score: score}, {Member: member, Score: score}}, {{Member: "capacity", Score: score}, {Member: member, Score: score}}}
		for i, h := range []map[string]string{s.Hash, {field: value}, {"id": value, "gen": str, field: value}, {"owner": str, field: value}, {"state": str, field: value}} {
			s.Hash = h
			s.ZSet = zs[i]
			r := decode(s)
			if r.Kind == "" {
				t.Fatalf("no kind for %+v", s)
			}
			_ = r.Text()
			if _, err := json.Marshal(r); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// The ttl line of a field-lease hash names each
// field's TTL (the key has none), at most 4 of them (lockcore).
func TestInspectFieldTTLLine(t *testing.T) {
	h, ttls := map[string]string{}, map[string]int64{}
	for i := range 6 {
		f := "shard:" + string(rune('a'+i))
		h[f] = "01234567-89ab-cdef-0123-456789abcdef"
		ttls[f] = int64(1000 * (i + 1))
	}
	delete(ttls, "shard:b") // no expiry: said as none
	s := &layout.Snapshot{Key: "p:shards", Type: "hash", PTTL: -1, Hash: h, HashTTL: ttls, HashLen: 6}
	out := decode(s).Text()
	want := "ttl:   per field (HPTTL): shard:a 1s, shard:b none, shard:c 3s, shard:d 4s, … 2 more below\n"
	if !strings.Contains(out, want) {
		t.Errorf("%s\nwant %q", out, want)
	}
	s.HashTTL = nil // no HPTTL on the server: the key's own TTL
	if out := decode(s).Text(); !strings.Contains(out, "ttl:   none (never expires)\n") {
		t.Errorf("without HPTTL:\n%s", out)
	}
}

// --scan aligns its columns over all the keys, whatever a TTL's length.
func TestInspectScanAligned(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		raw := b.Admin(t)
		ctx := context.Background()
		tokVal := "01234567-89ab-cdef-0123-456789abcdef"
		for k, ttl := range map[string]time.Duration{"al:short": time.Minute, "al:long": 100000*time.Hour + 59*time.Minute + 59*time.Second + 999*time.Millisecond, "al:none": 0} {
			if err := raw.Set(ctx, b.Key(k), tokVal, ttl).Err(); err != nil {
				t.Fatal(err)
			}
		}
		code, out, errOut := runCmd(t, cmdline(b, "inspect", "--scan", "al:*")...)
		if code != exitOK {
			t.Fatalf("inspect --scan = %d %s", code, errOut)
		}
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		if len(lines) != 3 {
			t.Fatalf("want 3 lines:\n%s", out)
		}
		col := -1
		for _, l := range lines {
			i := strings.Index(l, b.Prefix()+"al:")
			if i < 0 || (col >= 0 && i != col) {
				t.Fatalf("keys not in one column:\n%s", out)
			}
			col = i
			if !strings.Contains(l, "no-ttl") && !strings.Contains(l, "ttl=") {
				t.Errorf("no TTL column: %q", l)
			}
		}
		if !strings.Contains(out, "ttl=100000h") {
			t.Errorf("the long TTL is not listed:\n%s", out)
		}
	})
}

// inspect --scan says one line per key, whatever the key, its value or
// its problem hold, and a key of no library layout is not called corrupt
// (issue 22: a foreign string was labelled CORRUPT over several lines).
func TestInspectScanOneLinePerKey(t *testing.T) {
	url, raw := leaderServer(t)
	ctx := context.Background()
	for k, v := range map[string]string{
		"scan:foreign":      "line one\nline two\tx",
		"scan:odd\nkey":     "v",
		"scan:{c2}:fence\r": "7",
	} {
		if err := raw.Set(ctx, k, v, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	// A fence counter with a TTL: corrupt.
	if err := raw.Set(ctx, "scan:{c}:fence", "12", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCmd(t, "inspect", "--redis", url, "--scan", "scan:*")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if code != exitOK || len(lines) != 4 {
		t.Fatalf("exit %d, %d lines for 4 keys:\n%s%s", code, len(lines), out, errOut)
	}
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "unknown"):
			if strings.Contains(l, "CORRUPT") || !strings.Contains(l, "not a library key") {
				t.Errorf("a foreign key's line: %q", l)
			}
		case strings.Contains(l, `scan:{c}:fence`):
			if !strings.Contains(l, "CORRUPT: ") || strings.Count(l, "CORRUPT") != 1 {
				t.Errorf("a corrupt counter's line: %q", l)
			}
		}
	}
	if strings.Count(out, "CORRUPT: ") != 1 {
		t.Errorf("want one corrupt key:\n%s", out)
	}
}

// With a key prefix that holds a hash tag of its own, inspect finds a
// fencing lease's counter and a counter's lease by the key's own tag, not
// the prefix's (a new user's finding: it printed "{app}:fence (none)").
func TestInspectTaggedPrefixFindsTheSibling(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		prefix := b.Prefix() + "{app}:"
		coord, err := coordination.New(b.Client(t), coordination.WithKeyPrefix(prefix))
		if err != nil {
			t.Fatal(err)
		}
		m, err := fencing.New(coord, "{h1}:lease", "{h1}:fence")
		if err != nil {
			t.Fatal(err)
		}
		l, err := m.TryAcquire(ctx, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _, _ = l.Release(ctx) }()
		out := expect(t, exitOK, "fence counter:", cmdline(b, "inspect", "--prefix", prefix, "{h1}:lease")...)
		if !strings.Contains(out, prefix+"{h1}:fence = 1") {
			t.Errorf("inspect of the lease:\n%s\nwant its counter %s{h1}:fence = 1", out, prefix)
		}
	})
}
