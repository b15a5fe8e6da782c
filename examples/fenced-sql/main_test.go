package main

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/fencing"
	"github.com/coordkit/coordination/redlock"
)

// A paused holder's late write is refused by the database after its
// successor wrote: the Redlock's fencing node orders the holders, SQLite
// enforces the order (UPDATE ... WHERE fence <= $token).
func TestPausedHolderRefusedRedlock(t *testing.T) {
	var (
		coords []*coordination.Coordinator
		minis  []*miniredis.Miniredis
	)
	for range 3 {
		m := miniredis.RunT(t)
		rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
		t.Cleanup(func() { rdb.Close() })
		c, err := coordination.New(rdb)
		if err != nil {
			t.Fatal(err)
		}
		coords = append(coords, c)
		minis = append(minis, m)
	}
	g, err := redlock.New(coords, redlock.WithFencing(1))
	if err != nil {
		t.Fatal(err)
	}
	s := openStore(t)
	var out bytes.Buffer
	o, err := Scenario(context.Background(), g, s, func(d time.Duration) {
		for _, m := range minis {
			m.FastForward(d)
		}
	}, &out)
	if err != nil {
		t.Fatal(err)
	}
	checkRefused(t, o, out.String())
}

// The same with package fencing's single-node fencing lock writing through
// the same store: the resource-side check is the same.
func TestPausedHolderRefusedFencingLock(t *testing.T) {
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { rdb.Close() })
	coord, err := coordination.New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s := openStore(t)
	if err := s.Create(ctx, "inv"); err != nil {
		t.Fatal(err)
	}
	mu, err := fencing.New(coord, "{inv}:lease", "{inv}:fence")
	if err != nil {
		t.Fatal(err)
	}
	a, err := mu.TryAcquire(ctx, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Write(ctx, "inv", "by A", a.FencingToken()); err != nil {
		t.Fatal(err)
	}
	m.FastForward(2 * time.Second) // A is paused past its lease
	b, err := mu.TryAcquire(ctx, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Write(ctx, "inv", "by B", b.FencingToken()); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(ctx, "inv", "by A, late", a.FencingToken()); !errors.Is(err, ErrStale) {
		t.Fatalf("A's late write: %v, want ErrStale", err)
	}
	if body, fence, err := s.Read(ctx, "inv"); err != nil || body != "by B" || fence != b.FencingToken() {
		t.Fatalf("invoice %q fence %d (%v), want B's", body, fence, err)
	}
}

// The command itself runs the scenario and succeeds.
func TestRun(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "refused") {
		t.Fatalf("output lacks the refusal:\n%s", out.String())
	}
}

func openStore(t *testing.T) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "db.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func checkRefused(t *testing.T, o Outcome, out string) {
	t.Helper()
	if o.TokenA < 1 || o.TokenB <= o.TokenA {
		t.Fatalf("tokens A %d, B %d: want 0 < A < B", o.TokenA, o.TokenB)
	}
	if !errors.Is(o.LateWrite, ErrStale) {
		t.Fatalf("A's late write: %v, want ErrStale\n%s", o.LateWrite, out)
	}
	if o.Body != "total 120 (by B)" || o.Fence != o.TokenB {
		t.Fatalf("invoice %q fence %d, want B's write\n%s", o.Body, o.Fence, out)
	}
}
