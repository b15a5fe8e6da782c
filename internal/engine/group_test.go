package engine_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// AdmitGroup admits through every engine's hooks in order, passes each
// hook's context to the next, reports the outcome to all in reverse order,
// and records one duration (on the first engine's meter, even when every
// engine shares the provider); a rejection tells the hooks admitted before
// it Failed and stops.
func TestAdmitGroup(t *testing.T) {
	reader := metric.NewManualReader()
	mp := metric.NewMeterProvider(metric.WithReader(reader))
	b := testharness.Get(t, "miniredis")
	var log []string
	type key struct{}
	hook := func(name string, reject error) hooks.Hook {
		return hooks.Func(func(ctx context.Context, op hooks.Operation) (context.Context, hooks.Done, error) {
			prev, _ := ctx.Value(key{}).(string)
			log = append(log, name+" admits "+op.Name+" after "+prev)
			if reject != nil {
				return ctx, nil, reject
			}
			return context.WithValue(ctx, key{}, name), func(o hooks.Outcome, _ error) { log = append(log, name+" "+o.String()) }, nil
		})
	}
	errNo := errors.New("no")
	var es []*engine.Engine
	for _, h := range []hooks.Hook{hook("a", nil), hook("b", nil), hook("c", nil)} {
		es = append(es, eng(t, must(coordination.New(b.Client(t), coordination.WithMeterProvider(mp), coordination.WithHooks(h)))(t)))
	}
	ctx, op, err := engine.AdmitGroup(context.Background(), es, hooks.RedlockAcquire, "redlock")
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := ctx.Value(key{}).(string); v != "c" {
		t.Fatalf("context from the last hook: %q", v)
	}
	op.End(nil)
	want := []string{"a admits REDLOCK ACQUIRE after ", "b admits REDLOCK ACQUIRE after a", "c admits REDLOCK ACQUIRE after b", "c succeeded", "b succeeded", "a succeeded"}
	if !slices.Equal(log, want) {
		t.Fatalf("hooks saw %q, want %q", log, want)
	}
	log = nil
	rejecting := eng(t, must(coordination.New(b.Client(t), coordination.WithHooks(hook("r", errNo))))(t))
	_, _, err = engine.AdmitGroup(context.Background(), []*engine.Engine{es[0], rejecting, es[2]}, hooks.RedlockRelease, "redlock")
	if !errors.Is(err, errNo) {
		t.Fatalf("rejection: %v", err)
	}
	want = []string{"a admits REDLOCK RELEASE after ", "r admits REDLOCK RELEASE after a", "a failed"}
	if !slices.Equal(log, want) {
		t.Fatalf("hooks saw %q, want %q", log, want)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == engine.OperationDuration.Name {
				for _, dp := range m.Data.(metricdata.Histogram[float64]).DataPoints {
					n += dp.Count
				}
			}
		}
	}
	if n != 1 {
		t.Fatalf("%d durations recorded for one group operation, want 1", n)
	}
}
