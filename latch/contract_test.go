package latch_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/testkit/contract"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/latch"
)

// The contract suite on one latch's life: create it, be refused a second
// create, join, read, give up waiting, count down to zero, wait for the
// complete latch, be refused a count-down past zero, reset, and find the
// old handle stale.
//
// There is no LostReply case. Nothing a lost reply leaves behind needs
// undoing: a latch is not a held lease. A count-down re-sent by go-redis
// after a lost reply carries the same signal id and is counted once
// (TestResentRequestsCountOnce), and a count-down whose reply is lost for
// good is documented as "may or may not have counted": removing it again
// would need a count-up that could race a completion waiters already saw.
// A create or reset whose reply is lost leaves the latch the caller asked
// for; its re-send finds its own generation and succeeds.
func TestContract(t *testing.T) {
	contract.Run(t, contract.Spec{
		Primitive:   "latch",
		NoLostReply: "a latch is not a held lease; a re-sent count-down carries its signal id and counts once",
		Keys:        func(name string) []string { return []string{name} },
		Metrics: []string{
			"coordination.latch.count_downs", // counted, completed
			"coordination.latch.wait",        // gave_up, completed, replaced
		},
		Scenario: func(name string) []contract.Step {
			var l, j *latch.Generation
			return []contract.Step{
				{Name: "Create", Op: hooks.LatchCreate, OneCommand: true, Run: func(ctx context.Context, c *coordination.Coordinator) (err error) {
					l, err = create(ctx, c, name, 2)
					return err
				}},
				{Name: "Create on an existing latch", Op: hooks.LatchCreate, OneCommand: true, Run: func(ctx context.Context, c *coordination.Coordinator) error {
					if _, err := create(ctx, c, name, 5); !errors.Is(err, latch.ErrExists) {
						return fmt.Errorf("want ErrExists, got %v", err)
					}
					return nil
				}},
				{Name: "Join", Op: hooks.LatchJoin, OneCommand: true, Run: func(ctx context.Context, c *coordination.Coordinator) (err error) {
					j, err = join(ctx, c, name)
					if err == nil {
						err = contract.Expect("joined generation", j.Number(), 1)
					}
					return err
				}},
				{Name: "Count", Op: hooks.LatchRead, OneCommand: true, Run: func(ctx context.Context, _ *coordination.Coordinator) error {
					n, err := l.Count(ctx)
					if err == nil {
						err = contract.Expect("Count", n, 2)
					}
					return err
				}},
				{Name: "Wait giving up", Op: hooks.LatchWait, Outcome: hooks.Canceled, Run: func(ctx context.Context, _ *coordination.Coordinator) error {
					ctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
					defer cancel()
					if ok, err := j.Wait(ctx); ok || !errors.Is(err, context.DeadlineExceeded) {
						return fmt.Errorf("want false and DeadlineExceeded, got %v, %v", ok, err)
					}
					return nil
				}},
				{Name: "CountDown", Op: hooks.LatchCountDown, OneCommand: true, Run: func(ctx context.Context, _ *coordination.Coordinator) error {
					n, err := j.CountDown(ctx)
					if err == nil {
						err = contract.Expect("CountDown", n, 1)
					}
					return err
				}},
				{Name: "CountDown to zero", Op: hooks.LatchCountDown, OneCommand: true, Run: func(ctx context.Context, _ *coordination.Coordinator) error {
					n, err := l.CountDown(ctx)
					if err == nil {
						err = contract.Expect("CountDown", n, 0)
					}
					return err
				}},
				{Name: "Wait that completes", Op: hooks.LatchWait, OneCommand: true, Run: func(ctx context.Context, _ *coordination.Coordinator) error {
					ok, err := j.Wait(ctx)
					if err == nil {
						err = contract.Expect("Wait", ok, true)
					}
					return err
				}},
				{Name: "CountDown past zero", Op: hooks.LatchCountDown, OneCommand: true, Run: func(ctx context.Context, _ *coordination.Coordinator) error {
					if _, err := l.CountDown(ctx); !errors.Is(err, latch.ErrCompleted) {
						return fmt.Errorf("want ErrCompleted, got %v", err)
					}
					return nil
				}},
				{Name: "Reset", Op: hooks.LatchReset, OneCommand: true, Run: func(ctx context.Context, c *coordination.Coordinator) error {
					fresh, err := reset(ctx, c, name, 1)
					if err == nil {
						err = contract.Expect("reset generation", fresh.Number(), 2)
					}
					return err
				}},
				{Name: "Count of the old generation", Op: hooks.LatchRead, OneCommand: true, Run: func(ctx context.Context, _ *coordination.Coordinator) error {
					if _, err := l.Count(ctx); !errors.Is(err, latch.ErrStaleGeneration) {
						return fmt.Errorf("want ErrStaleGeneration, got %v", err)
					}
					return nil
				}},
				{Name: "Wait on the old generation", Op: hooks.LatchWait, OneCommand: true, Run: func(ctx context.Context, _ *coordination.Coordinator) error {
					ok, err := l.Wait(ctx)
					if err == nil {
						err = contract.Expect("Wait", ok, false)
					}
					return err
				}},
			}
		},
		BadInputs: []contract.BadInput{
			{Arg: "coord", Call: func(ctx context.Context, c *coordination.Coordinator) error {
				_, err := latch.New(nil, "k")
				return err
			}},
			{Arg: "key", Call: func(ctx context.Context, c *coordination.Coordinator) error {
				_, err := latch.New(c, "")
				return err
			}},
			{Arg: "count", Op: hooks.LatchCreate, Call: func(ctx context.Context, c *coordination.Coordinator) error {
				_, err := create(ctx, c, "k", -1)
				return err
			}},
			{Arg: "count", Op: hooks.LatchReset, Call: func(ctx context.Context, c *coordination.Coordinator) error {
				_, err := reset(ctx, c, "k", latch.MaxCount+1)
				return err
			}},
			{Arg: "deadline", Call: func(ctx context.Context, c *coordination.Coordinator) error {
				_, err := latch.New(c, "k", latch.WithDeadline(0))
				return err
			}},
			{Arg: "keyTTL", Call: func(ctx context.Context, c *coordination.Coordinator) error {
				_, err := latch.New(c, "k", latch.WithKeyTTL(time.Microsecond))
				return err
			}},
			{Arg: "recheck", Call: func(ctx context.Context, c *coordination.Coordinator) error {
				_, err := latch.New(c, "k", latch.WithRecheck(0))
				return err
			}},
			{Arg: "latch", Op: hooks.LatchCreate, Call: func(ctx context.Context, c *coordination.Coordinator) error {
				var l *latch.Latch
				_, err := l.Create(ctx, 1)
				return err
			}},
			{Arg: "latch", Op: hooks.LatchJoin, Call: func(ctx context.Context, c *coordination.Coordinator) error {
				var l *latch.Latch
				_, err := l.Join(ctx)
				return err
			}},
			{Arg: "latch", Op: hooks.LatchReset, Call: func(ctx context.Context, c *coordination.Coordinator) error {
				var l *latch.Latch
				_, err := l.Reset(ctx, 1)
				return err
			}},
			{Arg: "generation", Op: hooks.LatchCountDown, Call: func(ctx context.Context, c *coordination.Coordinator) error {
				var g *latch.Generation
				_, err := g.CountDown(ctx)
				return err
			}},
			{Arg: "generation", Op: hooks.LatchWait, Call: func(ctx context.Context, c *coordination.Coordinator) error {
				var g *latch.Generation
				_, err := g.Wait(ctx)
				return err
			}},
			{Arg: "generation", Op: hooks.LatchRead, Call: func(ctx context.Context, c *coordination.Coordinator) error {
				var g *latch.Generation
				_, err := g.Count(ctx)
				return err
			}},
		},
	})
}

// The latch's instruments count what happened, by result:
// coordination.latch.count_downs (counted, completed, stale, not_found,
// broken) and coordination.latch.wait (completed, replaced, broken,
// gave_up).
func TestMetrics(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		reader := sdkmetric.NewManualReader()
		coord := b.Coordinator(t, coordination.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))))
		raw := b.Raw(t)

		old := mustCreate(t, coord, 2, latch.WithDeadline(time.Second))
		if _, err := old.CountDown(ctx); err != nil { // counted
			t.Fatal(err)
		}
		gaveUp, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		if _, err := old.Wait(gaveUp); !errors.Is(err, context.DeadlineExceeded) { // gave_up
			t.Fatalf("Wait: %v", err)
		}
		cancel()
		b.Advance(1100 * time.Millisecond)
		if _, err := old.CountDown(ctx); !errors.Is(err, latch.ErrBroken) { // broken
			t.Fatalf("CountDown past the deadline: %v", err)
		}
		if _, err := old.Wait(ctx); !errors.Is(err, latch.ErrBroken) { // broken
			t.Fatalf("Wait past the deadline: %v", err)
		}
		fresh, err := reset(ctx, coord, key, 1)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := old.CountDown(ctx); !errors.Is(err, latch.ErrStaleGeneration) { // stale
			t.Fatalf("stale CountDown: %v", err)
		}
		if ok, err := old.Wait(ctx); ok || err != nil { // replaced
			t.Fatalf("stale Wait: %v, %v", ok, err)
		}
		if _, err := fresh.CountDown(ctx); err != nil { // counted
			t.Fatal(err)
		}
		if _, err := fresh.CountDown(ctx); !errors.Is(err, latch.ErrCompleted) { // completed
			t.Fatalf("CountDown past zero: %v", err)
		}
		if ok, err := fresh.Wait(ctx); !ok || err != nil { // completed
			t.Fatalf("Wait: %v, %v", ok, err)
		}
		if err := raw.Del(ctx, b.Key(key)).Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := fresh.CountDown(ctx); !errors.Is(err, latch.ErrNotFound) { // not_found
			t.Fatalf("CountDown after DEL: %v", err)
		}

		var rm metricdata.ResourceMetrics
		if err := reader.Collect(ctx, &rm); err != nil {
			t.Fatal(err)
		}
		got := map[string]int64{}
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				switch d := m.Data.(type) {
				case metricdata.Sum[int64]:
					for _, p := range d.DataPoints {
						v, _ := p.Attributes.Value("result")
						got[m.Name+"{"+v.AsString()+"}"] += p.Value
					}
				case metricdata.Histogram[float64]:
					for _, p := range d.DataPoints {
						v, _ := p.Attributes.Value("result")
						got[m.Name+"{"+v.AsString()+"}"] += int64(p.Count)
					}
				}
			}
		}
		cd, w := latch.CountDowns.Name, latch.Waits.Name
		want := map[string]int64{
			cd + "{counted}": 2, cd + "{completed}": 1, cd + "{stale}": 1, cd + "{not_found}": 1, cd + "{broken}": 1,
			w + "{completed}": 1, w + "{replaced}": 1, w + "{broken}": 1, w + "{gave_up}": 1,
		}
		for k, n := range want {
			if got[k] != n {
				t.Errorf("%s = %d, want %d", k, got[k], n)
			}
		}
		for k, n := range got {
			if _, ok := want[k]; !ok && (strings.HasPrefix(k, cd+"{") || strings.HasPrefix(k, w+"{")) {
				t.Errorf("unexpected measurement %s = %d", k, n)
			}
		}
	})
}
