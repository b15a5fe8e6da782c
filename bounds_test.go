package coordination_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/fencing"
	"github.com/coordkit/coordination/idempotency"
	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/sentinel"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/latch"
	"github.com/coordkit/coordination/leader"
	"github.com/coordkit/coordination/ratelimit"
	"github.com/coordkit/coordination/rwlease"
	"github.com/coordkit/coordination/semaphore"
)

// bounded is one argument with a size bound: call runs an operation with
// the argument n bytes long.
type bounded struct {
	op, arg string
	max     int
	call    func(ctx context.Context, c *coordination.Coordinator, n int) error
}

func sized(n int, tag string) string {
	// A {hash tag} keeps a fencing lock's two keys in one slot.
	if n < len(tag) {
		return strings.Repeat("k", n)
	}
	return tag + strings.Repeat("k", n-len(tag))
}

func boundedArgs() []bounded {
	key := func(op string, call func(ctx context.Context, c *coordination.Coordinator, key string) error) bounded {
		arg := "key"
		if strings.HasPrefix(op, "leader.") {
			arg = "leaseKey"
		}
		return bounded{op: op, arg: arg, max: check.MaxKeyBytes, call: func(ctx context.Context, c *coordination.Coordinator, n int) error {
			return call(ctx, c, sized(n, op)) // a key of its own per operation
		}}
	}
	return []bounded{
		key("lock.New", func(ctx context.Context, c *coordination.Coordinator, k string) error {
			_, err := lockTryAcquire(ctx, c, k, time.Second)
			return err
		}),
		key("lock.NewFieldSet", func(ctx context.Context, c *coordination.Coordinator, k string) error {
			_, err := lockTryAcquireField(ctx, c, k, "f", time.Second)
			return err
		}),
		{op: "lock.(*FieldSet).TryAcquire", arg: "field", max: check.MaxKeyBytes, call: func(ctx context.Context, c *coordination.Coordinator, n int) error {
			_, err := lockTryAcquireField(ctx, c, "jobs", sized(n, ""), time.Second)
			return err
		}},
		{op: "fencing.New+TryAcquire", arg: "leaseKey", max: check.MaxKeyBytes, call: func(ctx context.Context, c *coordination.Coordinator, n int) error {
			m, err := fencing.New(c, sized(n, "{t}"), "{t}fence")
			if err != nil {
				return err
			}
			_, err = m.TryAcquire(ctx, time.Second)
			return err
		}},
		{op: "fencing.New+TryAcquire", arg: "holder", max: check.MaxIdentityBytes, call: func(ctx context.Context, c *coordination.Coordinator, n int) error {
			m, err := fencing.New(c, "{h}lease", "{h}fence", fencing.WithHolder(sized(n, "")))
			if err != nil {
				return err
			}
			l, err := m.TryAcquire(ctx, time.Second)
			if err != nil {
				return err
			}
			_, err = l.Release(ctx)
			return err
		}},
		key("fencing.NewGuarded+Set", func(ctx context.Context, c *coordination.Coordinator, k string) error {
			g, err := fencing.NewGuarded(c, k)
			if err != nil {
				return err
			}
			_, _, err = g.Set(ctx, 1, []byte("v"), time.Minute)
			return err
		}),
		{op: "fencing.Guarded.Set", arg: "value", max: check.MaxValueBytes, call: func(ctx context.Context, c *coordination.Coordinator, n int) error {
			g, err := fencing.NewGuarded(c, "guarded")
			if err != nil {
				return err
			}
			_, _, err = g.Set(ctx, 1, make([]byte, n), time.Minute)
			return err
		}},
		key("semaphore.New+TryAcquire", func(ctx context.Context, c *coordination.Coordinator, k string) error {
			s, err := semaphore.New(c, k, 2)
			if err != nil {
				return err
			}
			_, err = s.TryAcquire(ctx, time.Second)
			return err
		}),
		key("rwlease.New+TryRead", func(ctx context.Context, c *coordination.Coordinator, k string) error {
			m, err := rwlease.New(c, k)
			if err != nil {
				return err
			}
			_, err = m.TryRead(ctx, time.Second)
			return err
		}),
		key("latch.New+Create", func(ctx context.Context, c *coordination.Coordinator, k string) error {
			l, err := latch.New(c, k)
			if err != nil {
				return err
			}
			_, err = l.Create(ctx, 1)
			return err
		}),
		key("leader.Get", func(ctx context.Context, c *coordination.Coordinator, k string) error {
			_, err := leader.Get(ctx, c, k)
			return err
		}),
		{op: "leader.New+Run", arg: "identity", max: check.MaxIdentityBytes, call: func(ctx context.Context, c *coordination.Coordinator, n int) error {
			el, err := leader.New(c, "{e}lease", "{e}fence", sized(n, ""), leader.OnElected(func(context.Context, *leader.Term) error { return nil }))
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			if err := el.Run(ctx); !errors.Is(err, context.DeadlineExceeded) {
				return err
			}
			return nil
		}},
		key("ratelimit.New+Allow", func(ctx context.Context, c *coordination.Coordinator, k string) error {
			l, err := ratelimit.New(c, k, ratelimit.FixedWindow{Limit: 1, Window: time.Second})
			if err != nil {
				return err
			}
			defer l.Close()
			_, err = l.Allow(ctx, 1)
			return err
		}),
		{op: "ratelimit.DenyList.Deny", arg: "identity", max: check.MaxIdentityBytes, call: func(ctx context.Context, c *coordination.Coordinator, n int) error {
			d, err := ratelimit.NewDenyList(c, "deny")
			if err != nil {
				return err
			}
			return d.Deny(ctx, sized(n, ""))
		}},
		{op: "ratelimit.WithDenyList", arg: "identity", max: check.MaxIdentityBytes, call: func(ctx context.Context, c *coordination.Coordinator, n int) error {
			d, err := ratelimit.NewDenyList(c, "deny")
			if err != nil {
				return err
			}
			l, err := ratelimit.New(c, "api", ratelimit.FixedWindow{Limit: 1, Window: time.Second}, ratelimit.WithDenyList(d, sized(n, "")))
			if err != nil {
				return err
			}
			defer l.Close()
			_, err = l.Allow(ctx, 1)
			return err
		}},
		key("idempotency.Begin", func(ctx context.Context, c *coordination.Coordinator, k string) error {
			s, err := idempotency.New(c)
			if err != nil {
				return err
			}
			_, err = s.Begin(ctx, k, time.Minute)
			return err
		}),
		{op: "idempotency.Begin", arg: "fingerprint", max: check.MaxFingerprintBytes, call: func(ctx context.Context, c *coordination.Coordinator, n int) error {
			s, err := idempotency.New(c)
			if err != nil {
				return err
			}
			_, err = s.Begin(ctx, "req", time.Minute, idempotency.WithFingerprint(sized(n, "")))
			return err
		}},
		{op: "idempotency.Complete", arg: "result", max: check.MaxValueBytes, call: func(ctx context.Context, c *coordination.Coordinator, n int) error {
			s, err := idempotency.New(c)
			if err != nil {
				return err
			}
			// Not the owner: at the bound, Complete runs and answers false.
			_, err = s.Complete(ctx, "done", "8e03978e-40d5-43e8-bc93-6894a57f9324", make([]byte, n))
			return err
		}},
		{op: "idempotency.Complete", arg: "owner", max: check.MaxIdentityBytes, call: func(ctx context.Context, c *coordination.Coordinator, n int) error {
			s, err := idempotency.New(c)
			if err != nil {
				return err
			}
			_, err = s.Complete(ctx, "other", sized(n, ""), nil)
			return err
		}},
	}
}

// Every bounded argument one byte over its bound is refused with
// ErrInvalidArgument naming it and nothing sent; at its bound it is
// accepted (the operation then runs: its answer is not an argument
// error).
func TestSizeBounds(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		client := b.Client(t)
		coord, err := coordination.New(client, coordination.WithKeyPrefix(b.Prefix()))
		if err != nil {
			t.Fatal(err)
		}
		counter := testharness.CountCommands(client)
		for _, bd := range boundedArgs() {
			counter.Reset()
			err := bd.call(ctx, coord, bd.max+1)
			if name, ok := check.ArgumentName(err); !ok || name != bd.arg || !errors.Is(err, coordination.ErrInvalidArgument) {
				t.Errorf("%s with %s of %d bytes: %v, want ErrInvalidArgument naming %q", bd.op, bd.arg, bd.max+1, err, bd.arg)
			}
			if sent := counter.Names(); len(sent) != 0 {
				t.Errorf("%s with %s over its bound sent %v", bd.op, bd.arg, sent)
			}
			err = bd.call(ctx, coord, bd.max)
			if errors.Is(err, coordination.ErrInvalidArgument) {
				t.Errorf("%s with %s of %d bytes (the bound): %v", bd.op, bd.arg, bd.max, err)
			}
			if err != nil && !sentinel.IsAnswer(err) && !(errors.Is(err, coordination.ErrUnsupportedServer) && (bd.op == "lock.NewFieldSet" || bd.op == "lock.(*FieldSet).TryAcquire")) {
				t.Errorf("%s with %s at its bound: %v", bd.op, bd.arg, err)
			}
		}
	})
}
