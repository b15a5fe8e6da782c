package fencing_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/fencing"
	"github.com/coordkit/coordination/internal/fencingcore"
	"github.com/coordkit/coordination/internal/slot"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// The layout of issue 24: the counters of the fenced names of one Cluster
// slot are fields of one shared hash, in that slot, so that the number of
// persistent keys does not grow with the number of names. Three names with
// one hash tag leave one hash with three fields and no counter key of
// their own; the hash is in the names' slot (on the Cluster backend: the
// server's CLUSTER KEYSLOT agrees).
func TestNamesOfOneSlotShareOneCounterHash(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Raw(t)
		coord := b.Coordinator(t)
		for i, n := range []string{"a", "b", "c"} {
			m := must(fencing.New(coord, "{shared}:"+n+":lease", "{shared}:"+n+":fence"))(t)
			for j := range i + 1 {
				l := must(m.TryAcquire(ctx, time.Minute))(t)
				if l.FencingToken() != int64(j+1) {
					t.Fatalf("%s: acquisition %d: token %d, want %d", n, j+1, l.FencingToken(), j+1)
				}
				must(l.Release(ctx))(t)
			}
		}
		hash, _ := sharedOf(b, "{shared}:a:fence")
		if want := b.Key(fencingcore.SharedBase); !strings.HasPrefix(hash, want) {
			t.Fatalf("shared hash %q does not start with %q", hash, want)
		}
		got := must(raw.HGetAll(ctx, hash).Result())(t)
		want := map[string]string{b.Key("{shared}:a:fence"): "1", b.Key("{shared}:b:fence"): "2", b.Key("{shared}:c:fence"): "3"}
		if len(got) != len(want) {
			t.Fatalf("shared hash %v, want %v", got, want)
		}
		for k, v := range want {
			if got[k] != v {
				t.Fatalf("shared hash %v, want %v", got, want)
			}
		}
		if ttl := must(raw.PTTL(ctx, hash).Result())(t); ttl != -1 {
			t.Fatalf("shared hash PTTL %v, want none", ttl)
		}
		for _, n := range []string{"a", "b", "c"} {
			if c := must(raw.Exists(ctx, b.Key("{shared}:"+n+":fence")).Result())(t); c != 0 {
				t.Fatalf("%s: a counter key of its own exists", n)
			}
		}
		if slot.Of(hash) != slot.Of(b.Key("{shared}:a:lease")) {
			t.Fatalf("shared hash %q in slot %d, the lease in %d", hash, slot.Of(hash), slot.Of(b.Key("{shared}:a:lease")))
		}
		if b.IsCluster() {
			s := must(raw.ClusterKeySlot(ctx, hash).Result())(t)
			l := must(raw.ClusterKeySlot(ctx, b.Key("{shared}:a:lease")).Result())(t)
			if s != l {
				t.Fatalf("server: shared hash in slot %d, lease in %d", s, l)
			}
		}
	})
}

// Tokens never go back across the layout change: a counter key written by
// an earlier version (a string, here at 1000) is folded into the shared
// hash by the first acquisition, which hands out 1001; the key is left
// holding the tombstone "moved" for 7 days, which the earlier version's
// script refuses (instead of starting again from 1). The next acquisition
// reads the field alone: 1002.
func TestEarlierLayoutCounterIsFoldedIn(t *testing.T) {
	before := must(os.ReadFile("testdata/fencing_acquire_before_issue24.lua"))(t)
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Raw(t)
		fk := b.Key("{old}:fence")
		must(raw.Set(ctx, fk, "1000", 0).Result())(t)
		m := must(fencing.New(b.Coordinator(t), "{old}:lease", "{old}:fence"))(t)
		l := must(m.TryAcquire(ctx, time.Minute))(t)
		if l.FencingToken() != 1001 {
			t.Fatalf("first token after the layout change: %d, want 1001", l.FencingToken())
		}
		if v := must(counterOf(ctx, raw, b, "{old}:fence").Result())(t); v != "1001" {
			t.Fatalf("shared field = %s, want 1001", v)
		}
		if v := must(raw.Get(ctx, fk).Result())(t); v != "moved" {
			t.Fatalf("earlier counter key holds %q, want the tombstone \"moved\"", v)
		}
		if ttl := must(raw.PTTL(ctx, fk).Result())(t); ttl <= 6*24*time.Hour || ttl > 7*24*time.Hour {
			t.Fatalf("tombstone TTL %v, want 7 days", ttl)
		}
		must(l.Release(ctx))(t)
		l = must(m.TryAcquire(ctx, time.Minute))(t)
		if l.FencingToken() != 1002 {
			t.Fatalf("second token: %d, want 1002", l.FencingToken())
		}
		must(l.Release(ctx))(t)

		// A process of the earlier version is refused, with nothing written,
		// instead of drawing token 1 from a counter key it finds empty.
		err := raw.Eval(ctx, string(before), []string{b.Key("{old}:lease"), fk}, "tok", 60000).Err()
		if err == nil || !strings.Contains(err.Error(), "COORD_BADCOUNTER") {
			t.Fatalf("earlier version's acquire on the tombstone: %v, want COORD_BADCOUNTER", err)
		}
		if c := must(raw.Exists(ctx, b.Key("{old}:lease")).Result())(t); c != 0 {
			t.Fatal("the earlier version's refused acquire wrote its lease")
		}

		// With the field gone (a retired name) the tombstone counts as no
		// counter: the sequence starts again at 1.
		hash, field := sharedOf(b, "{old}:fence")
		must(raw.HDel(ctx, hash, field).Result())(t)
		l = must(m.TryAcquire(ctx, time.Minute))(t)
		if l.FencingToken() != 1 {
			t.Fatalf("token after retirement: %d, want 1", l.FencingToken())
		}
		must(l.Release(ctx))(t)
	})
}

// A shared counter hash or field the acquisition cannot trust is refused
// before anything is written, naming the counter key (the fenced name):
// the errors of the earlier layout's counter key, for its field.
func TestSharedCounterFieldIsValidated(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Raw(t)
		m := must(fencing.New(b.Coordinator(t), "{sv}:lease", "{sv}:fence"))(t)
		hash, field := sharedOf(b, "{sv}:fence")
		pre := `coordination: fenced lock acquire "{sv}:fence": `
		for _, c := range []struct {
			name, want string
			seed       func(redis.UniversalClient) error
		}{
			{"not a hash", "shared counter hash holds the wrong Redis type, not a hash (COORD_BADCOUNTER)",
				func(c redis.UniversalClient) error { return c.Set(ctx, hash, "x", 0).Err() }},
			{"hash with a TTL", "shared counter hash has a TTL; it must never expire (COORD_BADCOUNTER)",
				func(c redis.UniversalClient) error {
					return errors.Join(c.HSet(ctx, hash, field, "4").Err(), c.Expire(ctx, hash, time.Hour).Err())
				}},
			{"new name, hash with a TTL", "shared counter hash has a TTL; it must never expire (COORD_BADCOUNTER)",
				func(c redis.UniversalClient) error {
					return errors.Join(c.HSet(ctx, hash, "other", "4").Err(), c.Expire(ctx, hash, time.Hour).Err())
				}},
			{"not canonical", "counter is not a canonical integer (COORD_BADCOUNTER)",
				func(c redis.UniversalClient) error { return c.HSet(ctx, hash, field, "007").Err() }},
			{"negative", "counter is negative (COORD_BADCOUNTER)",
				func(c redis.UniversalClient) error { return c.HSet(ctx, hash, field, "-3").Err() }},
			{"beyond int64", "counter is beyond the int64 range (COORD_BADCOUNTER)",
				func(c redis.UniversalClient) error { return c.HSet(ctx, hash, field, "9223372036854775808").Err() }},
			{"at the maximum", "counter is at 9223372036854775807 (COORD_OVERFLOW)",
				func(c redis.UniversalClient) error { return c.HSet(ctx, hash, field, "9223372036854775807").Err() }},
		} {
			must(raw.Del(ctx, hash, b.Key("{sv}:lease"), b.Key("{sv}:fence")).Result())(t)
			if err := c.seed(raw); err != nil {
				t.Fatal(err)
			}
			state := func() string {
				typ := must(raw.Type(ctx, hash).Result())(t)
				ttl := must(raw.PTTL(ctx, hash).Result())(t) > 0
				if typ == "hash" {
					return fmt.Sprint(typ, ttl, must(raw.HGetAll(ctx, hash).Result())(t))
				}
				return fmt.Sprint(typ, ttl, must(raw.Get(ctx, hash).Result())(t))
			}
			snap := state()
			_, err := m.TryAcquire(ctx, time.Minute)
			if !errors.Is(err, coordination.ErrBadState) || err.Error() != pre+c.want {
				t.Errorf("%s: %v\nwant ErrBadState %s", c.name, err, pre+c.want)
			}
			if n := must(raw.Exists(ctx, b.Key("{sv}:lease"), b.Key("{sv}:fence")).Result())(t); n != 0 {
				t.Errorf("%s: the refused acquisition wrote the lease or a counter key", c.name)
			}
			if now := state(); now != snap {
				t.Errorf("%s: the refused acquisition changed the shared hash", c.name)
			}
		}
	})
}

// A key prefix with a hash tag of its own puts every key of the prefix in
// one slot: the names' counters are then spread over the hashes of that
// slot by the slot each counter key would have without the prefix (one
// hash of a million fields would cost more per name than keys of their
// own), each still in the prefix's slot.
func TestTaggedPrefixSpreadsCountersOverHashes(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Raw(t)
		prefix := "{" + b.Prefix() + "}"
		coord := must(coordination.New(b.Admin(t), coordination.WithKeyPrefix(prefix)))(t)
		var hashes []string
		for _, n := range []string{"{a}", "{b}"} {
			m := must(fencing.New(coord, n+":lease", n+":fence"))(t)
			l := must(m.TryAcquire(ctx, time.Minute))(t)
			must(l.Release(ctx))(t)
			h := fencingcore.SharedKeyOf(prefix, prefix+n+":fence")
			want := fencingcore.SharedKey(prefix, slot.Of(prefix)) + ":" + strconv.Itoa(slot.Of(n))
			if h != want {
				t.Fatalf("%s: shared hash %q, want %q", n, h, want)
			}
			if v := must(raw.HGet(ctx, h, prefix+n+":fence").Result())(t); v != "1" {
				t.Fatalf("%s: counter %q, want 1", n, v)
			}
			if slot.Of(h) != slot.Of(prefix+n+":lease") {
				t.Fatalf("%s: shared hash in slot %d, lease in %d", n, slot.Of(h), slot.Of(prefix+n+":lease"))
			}
			hashes = append(hashes, h)
		}
		if hashes[0] == hashes[1] {
			t.Fatalf("both names in one hash %q", hashes[0])
		}
	})
}

// One round trip per acquisition in the shared layout, on the hot path (a
// name with its field) and when an earlier counter key is folded in: the
// counting hook sees one command (EVALSHA) for each.
func TestSharedLayoutAcquireIsOneRoundTrip(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		c := b.Client(t)
		coord := must(coordination.New(c, coordination.WithKeyPrefix(b.Prefix())))(t)
		m := must(fencing.New(coord, "{rt}:lease", "{rt}:fence"))(t)
		l := must(m.TryAcquire(ctx, time.Minute))(t) // loads the script
		must(l.Release(ctx))(t)
		// Load the script on the node of {rt2} too (a Cluster's other
		// shard), on another name of that slot.
		l = must(must(fencing.New(coord, "{rt2}:warm:lease", "{rt2}:warm:fence"))(t).TryAcquire(ctx, time.Minute))(t)
		must(l.Release(ctx))(t)
		must(b.Raw(t).Set(ctx, b.Key("{rt2}:fence"), "1000", 0).Result())(t)
		folded := must(fencing.New(coord, "{rt2}:lease", "{rt2}:fence"))(t)
		counter := testharness.CountCommands(c)
		for _, tc := range []struct {
			name string
			m    *fencing.Mutex
			want int64
		}{{"hot path", m, 2}, {"fold", folded, 1001}} {
			counter.Reset()
			l := must(tc.m.TryAcquire(ctx, time.Minute))(t)
			if n := counter.Count(); n != 1 || l.FencingToken() != tc.want {
				t.Errorf("%s: %d commands %v, token %d; want 1 command, token %d", tc.name, n, counter.Names(), l.FencingToken(), tc.want)
			}
			must(l.Release(ctx))(t)
		}
	})
}
