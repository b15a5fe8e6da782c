package coordination_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/fencing"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/lock"
	"github.com/coordkit/coordination/rwlease"
	"github.com/coordkit/coordination/semaphore"
)

// A blocking acquisition against a Redis that cannot be reached gives up
// when its context ends with the outage's error, not with contention's:
// the error matches the context's error and, when an attempt came back
// with it, the refused dial (go-redis, retrying its dial, may hold one
// attempt until the context ends and return the context's error bare),
// says Redis answered nothing otherwise, names the operation and the key,
// and does not match ErrNotAcquired. (Each returned "not acquired: context
// deadline exceeded", so code treating ErrNotAcquired as "another replica
// holds it" took an outage for contention.)
func TestBlockingAcquireDuringAnOutageIsNotContention(t *testing.T) {
	addr := testharness.RefusedAddr(t) // every dial is refused
	acquire := map[string]func(context.Context, *coordination.Coordinator) error{
		`lock acquire "outage"`: func(ctx context.Context, coord *coordination.Coordinator) error {
			m, err := lock.New(coord, "outage")
			if err != nil {
				return err
			}
			_, err = m.Acquire(ctx, time.Second)
			return err
		},
		`fenced lock acquire "{outage}"`: func(ctx context.Context, coord *coordination.Coordinator) error {
			m, err := fencing.New(coord, "{outage}", "{outage}:fence")
			if err != nil {
				return err
			}
			_, err = m.Acquire(ctx, time.Second)
			return err
		},
		`semaphore acquire "outage"`: func(ctx context.Context, coord *coordination.Coordinator) error {
			s, err := semaphore.New(coord, "outage", 2)
			if err != nil {
				return err
			}
			_, err = s.Acquire(ctx, time.Second)
			return err
		},
		`rwlease write acquire "outage"`: func(ctx context.Context, coord *coordination.Coordinator) error {
			m, err := rwlease.New(coord, "outage")
			if err != nil {
				return err
			}
			_, err = m.Write(ctx, time.Second)
			return err
		},
	}
	for name, run := range acquire {
		t.Run(name, func(t *testing.T) {
			// A client of its own, with a pool larger than the dials the
			// test makes: go-redis starts a background redial (which
			// outlives Close by up to a second) once failed dials reach
			// the pool's size.
			client := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 1000})
			t.Cleanup(func() { client.Close() })
			coord, err := coordination.New(client)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_ = coord.Shutdown(ctx)
			})
			ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
			defer cancel()
			err = run(ctx, coord)
			switch {
			case err == nil:
				t.Fatal("acquired against a refused port")
			case errors.Is(err, coordination.ErrNotAcquired):
				t.Fatalf("%v: matches ErrNotAcquired; an outage is not contention", err)
			case !errors.Is(err, syscall.ECONNREFUSED) && !strings.HasSuffix(err.Error(), "; Redis answered no attempt"):
				t.Fatalf("%v: neither matches the refused dial nor says Redis answered nothing", err)
			case !errors.Is(err, context.DeadlineExceeded):
				t.Fatalf("%v: does not match the context's error", err)
			case !strings.HasPrefix(err.Error(), "coordination: "+name+": "):
				t.Fatalf("%q does not name the operation and key as %q", err, name)
			}
		})
	}
}

// An acquisition whose context has already ended sends nothing and
// returns the context's error, named with the operation and the key, and
// not ErrNotAcquired: nothing was asked, so nothing was refused. (The
// blocking acquisitions returned "not acquired: context canceled",
// contention's error; the non-blocking ones sent their attempt, which
// go-redis refused to write, and then a background release of it.)
func TestAcquireWithAnEndedContextSendsNothing(t *testing.T) {
	b := testharness.Get(t, "miniredis")
	type acquireFunc func(context.Context, *coordination.Coordinator) error
	lease := func(acquire func(context.Context, *coordination.Coordinator) (any, error)) acquireFunc {
		return func(ctx context.Context, coord *coordination.Coordinator) error {
			_, err := acquire(ctx, coord)
			return err
		}
	}
	cases := map[string]acquireFunc{}
	for _, block := range []bool{false, true} {
		cases[fmt.Sprintf(`lock acquire "ended" block=%v`, block)] = lease(func(ctx context.Context, coord *coordination.Coordinator) (any, error) {
			m, err := lock.New(coord, "ended")
			if err != nil {
				return nil, err
			}
			if block {
				return m.Acquire(ctx, time.Second)
			}
			return m.TryAcquire(ctx, time.Second)
		})
		cases[fmt.Sprintf(`fenced lock acquire "{ended}" block=%v`, block)] = lease(func(ctx context.Context, coord *coordination.Coordinator) (any, error) {
			m, err := fencing.New(coord, "{ended}", "{ended}:fence")
			if err != nil {
				return nil, err
			}
			if block {
				return m.Acquire(ctx, time.Second)
			}
			return m.TryAcquire(ctx, time.Second)
		})
		cases[fmt.Sprintf(`semaphore acquire "ended" block=%v`, block)] = lease(func(ctx context.Context, coord *coordination.Coordinator) (any, error) {
			s, err := semaphore.New(coord, "ended", 2)
			if err != nil {
				return nil, err
			}
			if block {
				return s.Acquire(ctx, time.Second)
			}
			return s.TryAcquire(ctx, time.Second)
		})
		cases[fmt.Sprintf(`rwlease write acquire "ended" block=%v`, block)] = lease(func(ctx context.Context, coord *coordination.Coordinator) (any, error) {
			m, err := rwlease.New(coord, "ended")
			if err != nil {
				return nil, err
			}
			if block {
				return m.Write(ctx, time.Second)
			}
			return m.TryWrite(ctx, time.Second)
		})
		cases[fmt.Sprintf(`rwlease read acquire "ended" block=%v`, block)] = lease(func(ctx context.Context, coord *coordination.Coordinator) (any, error) {
			m, err := rwlease.New(coord, "ended")
			if err != nil {
				return nil, err
			}
			if block {
				return m.Read(ctx, time.Second)
			}
			return m.TryRead(ctx, time.Second)
		})
	}
	for name, run := range cases {
		t.Run(name, func(t *testing.T) {
			client := b.Client(t)
			counter := testharness.CountCommands(client)
			coord, err := coordination.New(client, coordination.WithKeyPrefix(b.Prefix()))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			err = run(ctx, coord)
			op, _, _ := strings.Cut(name, " block=")
			if want := "coordination: " + op + ": context canceled"; err == nil || err.Error() != want {
				t.Fatalf("err = %v, want %q", err, want)
			}
			if !errors.Is(err, context.Canceled) || errors.Is(err, coordination.ErrNotAcquired) {
				t.Fatalf("%v: want it to match context.Canceled and not ErrNotAcquired", err)
			}
			// Shutdown gives pending background cleanups their last try:
			// none may exist.
			sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer scancel()
			if err := coord.Shutdown(sctx); err != nil {
				t.Fatal(err)
			}
			if n := counter.Count(); n != 0 {
				t.Fatalf("%d commands sent (%v), want none", n, counter.Names())
			}
		})
	}
}
