package main

import (
	"context"
	"testing"
	"time"

	"github.com/coordkit/coordination/fencing"
	"github.com/coordkit/coordination/internal/fencingcore"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// fence retire deletes a fenced name's counter (its field in the shared
// counter hash, and an earlier layout's key or tombstone) and nothing else:
// the name's next token is 1 again, another name's counter in the same
// hash is kept. It refuses while the lease given with --lease exists, a
// name without a counter, and a key of another kind, changing nothing.
func TestFenceRetire(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		coord := b.Coordinator(t)
		raw := b.Raw(t)
		m, err := fencing.New(coord, "{inv:9}:lease", "{inv:9}:fence")
		if err != nil {
			t.Fatal(err)
		}
		other, err := fencing.New(coord, "{inv:9}:other:lease", "{inv:9}:other:fence")
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			l, err := m.TryAcquire(ctx, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := l.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
		ol, err := other.TryAcquire(ctx, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		held, err := m.TryAcquire(ctx, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		shared := fencingcore.SharedKeyOf(b.Prefix(), b.Key("{inv:9}:fence"))
		expect(t, exitRefused, "the name is held now", cmdline(b, "fence retire", "--key", "{inv:9}:fence", "--lease", "{inv:9}:lease")...)
		if v := raw.HGet(ctx, shared, b.Key("{inv:9}:fence")).Val(); v != "4" {
			t.Fatalf("the refused retirement changed the counter to %q, want 4", v)
		}
		if _, err := held.Release(ctx); err != nil {
			t.Fatal(err)
		}
		expect(t, exitOK, "(last token 4): its next acquisition draws token 1", cmdline(b, "fence retire", "--key", "{inv:9}:fence", "--lease", "{inv:9}:lease")...)
		if n := raw.HExists(ctx, shared, b.Key("{inv:9}:fence")).Val(); n {
			t.Fatal("the retired name's field is still in the shared hash")
		}
		if v := raw.HGet(ctx, shared, b.Key("{inv:9}:other:fence")).Val(); v != "1" {
			t.Fatalf("the other name's counter is %q, want 1 (kept)", v)
		}
		l, err := m.TryAcquire(ctx, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if l.FencingToken() != 1 {
			t.Fatalf("token after retirement %d, want 1", l.FencingToken())
		}
		_, _ = l.Release(ctx)
		_, _ = ol.Release(ctx)
		expect(t, exitOK, "(last token 1)", cmdline(b, "fence retire", "--key", "{inv:9}:fence")...)
		expect(t, exitRefused, "no fence counter", cmdline(b, "fence retire", "--key", "{inv:9}:fence")...)

		// An earlier layout's counter key, never folded, is retired too;
		// so is a folded name's tombstone with its field.
		if err := raw.Set(ctx, b.Key("{old:9}:fence"), "12", 0).Err(); err != nil {
			t.Fatal(err)
		}
		expect(t, exitOK, "(last token 12)", cmdline(b, "fence retire", "--key", "{old:9}:fence")...)
		if n := raw.Exists(ctx, b.Key("{old:9}:fence")).Val(); n != 0 {
			t.Fatal("the earlier layout's counter key is still there")
		}
		if err := raw.Set(ctx, b.Key("{old:9}:fence"), "20", 0).Err(); err != nil {
			t.Fatal(err)
		}
		om, err := fencing.New(coord, "{old:9}:lease", "{old:9}:fence")
		if err != nil {
			t.Fatal(err)
		}
		if l, err := om.TryAcquire(ctx, time.Minute); err != nil || l.FencingToken() != 21 {
			t.Fatalf("folded acquisition: %v %v, want token 21", l, err)
		} else {
			_, _ = l.Release(ctx)
		}
		expect(t, exitOK, "(last token 21)", cmdline(b, "fence retire", "--key", "{old:9}:fence")...)
		if n := raw.Exists(ctx, b.Key("{old:9}:fence")).Val(); n != 0 {
			t.Fatal("the tombstone is still there")
		}

		// A key of another kind is refused and kept.
		if err := raw.RPush(ctx, b.Key("{l:9}:fence"), "x").Err(); err != nil {
			t.Fatal(err)
		}
		expect(t, exitRefused, "not a fence counter", cmdline(b, "fence retire", "--key", "{l:9}:fence")...)
		if n := raw.Exists(ctx, b.Key("{l:9}:fence")).Val(); n != 1 {
			t.Fatal("the refused retirement deleted the list")
		}
		expect(t, exitUsage, "--key is required", cmdline(b, "fence retire")...)
	})
}
