package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/lock"
)

func init() {
	addScenario(scenario{
		order: 60,
		name:  "leases",
		title: "Named leases: 3 workers own shards in one hash; a crashed worker's shard is taken over",
		run:   runFieldLeaseDemo,
	})
}

// unsupportedLine starts the line the leases scenario prints on a server
// without hash-field expiration (the embedded miniredis, Redis 7.0, Valkey
// 8), instead of running.
const unsupportedLine = "this server lacks hash-field expiration"

// runFieldLeaseDemo has three workers (each its own coordinator) own
// shards as named leases in one hash. worker-1 "crashes" while holding
// shard:2 (no renewal, no release); worker-3 waits for shard:2 and gets it
// at its expiry, without touching the other shards; worker-1's stale
// handle cannot release worker-3's shard; worker-3 also waits for shard:3
// and gets it as soon as worker-2 releases it. The hash is printed as the
// server holds it (fields, owner tokens, per-field TTLs) at each stage.
//
// On a server without hash-field expiration the first acquisition fails
// with ErrUnsupportedServer before writing anything: the scenario says so
// and checks exactly that.
func runFieldLeaseDemo(ctx context.Context, d *demo) error {
	const (
		hash  = "leases:shards"
		ttl   = 300 * time.Millisecond
		crash = 250 * time.Millisecond
	)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	w1, w2, w3 := d.coord(), d.coord(), d.coord()
	client := w1.Client()
	full := d.prefix + hash
	owners := map[string]string{} // owner token -> worker
	// Each worker's view of the hash: one FieldSet per coordinator, no I/O.
	var set [3]*lock.FieldSet
	for i, w := range []*coordination.Coordinator{w1, w2, w3} {
		fs, err := lock.NewFieldSet(w, hash)
		if err != nil {
			return err
		}
		set[i] = fs
	}

	s1, err := set[0].TryAcquire(ctx, "shard:1", ttl)
	if errors.Is(err, coordination.ErrUnsupportedServer) {
		n, xerr := client.Exists(ctx, full).Result()
		d.logf("worker-1", "%s: %v", unsupportedLine, err)
		d.check("leases: unsupported server refused before writing", xerr == nil && n == 0,
			"ErrUnsupportedServer on the first operation; the hash exists: %v (%v). Run with --redis on Redis >= 7.4 or Valkey >= 9.0", n == 1, xerr)
		return nil
	}
	if err != nil {
		return err
	}
	owners[s1.Token()] = "worker-1"
	s1.KeepAlive()
	s2, err := set[0].TryAcquire(ctx, "shard:2", crash)
	if err != nil {
		return err
	}
	owners[s2.Token()] = "worker-1"
	s3, err := set[1].TryAcquire(ctx, "shard:3", ttl)
	if err != nil {
		return err
	}
	owners[s3.Token()] = "worker-2"
	s3.KeepAlive()
	d.logf("worker-1", "owns shard:1 (kept alive) and shard:2 (%v, then crashes: never renews or releases it)", crash)
	d.logf("worker-2", "owns shard:3 (kept alive)")
	ttlsOK := showHash(ctx, d, client, full, owners)

	_, refused := set[2].TryAcquire(ctx, "shard:1", ttl)
	d.logf("worker-3", "tries shard:1: %v", refused)
	d.check("leases: one holder per field", errors.Is(refused, coordination.ErrNotAcquired), "worker-3 refused shard:1 while worker-1 holds it: %v", refused)

	before, err := client.HGetAll(ctx, full).Result()
	if err != nil {
		return err
	}
	d.logf("worker-3", "waits for shard:2")
	start := time.Now()
	t2, err := set[2].Acquire(ctx, "shard:2", ttl)
	if err != nil {
		return err
	}
	owners[t2.Token()] = "worker-3"
	t2.KeepAlive()
	took := time.Since(start)
	d.logf("worker-3", "got shard:2 after %v, when worker-1's lease on it expired", took.Round(time.Millisecond))
	after, err := client.HGetAll(ctx, full).Result()
	if err != nil {
		return err
	}
	ttlsOK = showHash(ctx, d, client, full, owners) && ttlsOK
	// A keep-alive that missed its 300 ms lease on a loaded machine loses
	// shard:1 or shard:3 (their handles say so): the takeover stays checked,
	// the loss counts as late, not as a failure.
	kept := s1.Context().Err() == nil && s3.Context().Err() == nil
	untouched := after["shard:1"] == before["shard:1"] && after["shard:3"] == before["shard:3"]
	d.timed("leases: an expired field is taken over, the others untouched",
		after["shard:2"] == t2.Token() && (untouched || !kept), took < 2*time.Second && kept,
		"shard:2 changed hands after %v; shard:1 and shard:3 kept their owners: %v", took.Round(time.Millisecond), untouched && kept)

	out, err := s2.Release(ctx)
	d.logf("worker-1", "(back from the crash) releases its stale shard:2 handle: %v", out)
	d.check("leases: an old owner cannot release its successor's field", err == nil && out == coordination.NotOwned,
		"Release = %v (%v); worker-3 still holds shard:2: %v", out, err, t2.Remaining() > 0)

	got := make(chan time.Time, 1)
	var t3 *lock.FieldLease
	go func() {
		l, err := set[2].Acquire(ctx, "shard:3", ttl)
		if err == nil {
			t3 = l
			owners[l.Token()] = "worker-3"
		}
		got <- time.Now()
	}()
	time.Sleep(100 * time.Millisecond)
	d.logf("worker-2", "releases shard:3 (worker-3 is waiting for it)")
	released := time.Now()
	if _, err := s3.Release(ctx); err != nil {
		return err
	}
	woke := (<-got).Sub(released)
	if t3 == nil {
		return fmt.Errorf("worker-3 did not get shard:3")
	}
	t3.KeepAlive()
	d.logf("worker-3", "got shard:3 %v after the release", woke.Round(10*time.Microsecond))
	d.timed("leases: a release wakes that field's waiter", true, woke < time.Second, "%v from release to holding", woke.Round(10*time.Microsecond))
	ttlsOK = showHash(ctx, d, client, full, owners) && ttlsOK
	d.check("leases: every field has its own TTL", ttlsOK, "HPTTL > 0 for every field at every stage; the hash has no key-level TTL")

	for _, l := range []*lock.FieldLease{s1, t2, t3} {
		if _, err := l.Release(ctx); err != nil {
			return err
		}
	}
	n, err := client.Exists(ctx, full).Result()
	d.check("leases: the hash goes with its last field", err == nil && n == 0, "the hash exists after every release: %v (%v)", n == 1, err)
	return nil
}

// showHash prints the hash as the server holds it: each field, its owner
// (the worker whose token it holds) and its remaining TTL. It reports
// whether every field has a TTL and the hash none of its own.
func showHash(ctx context.Context, d *demo, c redis.UniversalClient, key string, owners map[string]string) bool {
	m, err := c.HGetAll(ctx, key).Result()
	if err != nil {
		d.logf("state", "HGETALL: %v", err)
		return false
	}
	fields := make([]string, 0, len(m))
	for f := range m {
		fields = append(fields, f)
	}
	slices.Sort(fields)
	ok := true
	var parts []string
	for _, f := range fields {
		ttl, err := c.Do(ctx, "HPTTL", key, "FIELDS", 1, f).Int64Slice()
		if err != nil || len(ttl) != 1 {
			d.logf("state", "HPTTL: %v", err)
			return false
		}
		ok = ok && ttl[0] > 0
		parts = append(parts, fmt.Sprintf("%s=%s…(%s) %dms", f, m[f][:8], owners[m[f]], ttl[0]))
	}
	pttl, err := c.PTTL(ctx, key).Result()
	ok = ok && err == nil && pttl < 0
	d.logf("state", "HGETALL+HPTTL %s: %s", strings.TrimPrefix(key, d.prefix), strings.Join(parts, ", "))
	return ok
}
