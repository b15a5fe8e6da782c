package lock_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/lock"
)

// The coordination.lock.* instruments: wait time, hold time, contention,
// renewal failures and losses, with attribute kind and nothing else that
// could identify a key or holder.
func TestLockTelemetry(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		coord, err := coordination.New(b.Client(t), coordination.WithKeyPrefix(b.Prefix()), coordination.WithMeterProvider(mp))
		if err != nil {
			t.Fatal(err)
		}
		holder, err := tryAcquire(ctx, coord, "m", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tryAcquire(ctx, coord, "m", time.Minute); err == nil {
			t.Fatal("contended acquire succeeded")
		}
		done := make(chan *lock.Lock)
		go func() {
			l, err := acquire(ctx, coord, "m", time.Minute)
			if err != nil {
				t.Error(err)
			}
			done <- l
		}()
		time.Sleep(50 * time.Millisecond)
		if _, err := holder.Release(ctx); err != nil {
			t.Fatal(err)
		}
		waiter := <-done
		// The waiter's lock is deleted behind its back: Verify finds it lost.
		if err := b.Client(t).Del(ctx, b.Key("m")).Err(); err != nil {
			t.Fatal(err)
		}
		if ok, _ := waiter.Verify(ctx); ok {
			t.Fatal("Verify = true after the key was deleted")
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
					for _, dp := range d.DataPoints {
						checkAttrs(t, m.Name, dp.Attributes)
						got[m.Name] += dp.Value
					}
				case metricdata.Histogram[float64]:
					for _, dp := range d.DataPoints {
						if m.Name != "coordination.operation.duration" {
							checkAttrs(t, m.Name, dp.Attributes)
						}
						got[m.Name] += int64(dp.Count)
					}
				}
			}
		}
		want := map[string]int64{
			"coordination.lock.contention":   2, // the TryAcquire and the waiting Acquire (once)
			"coordination.lock.acquire_wait": 1, // one blocking Acquire
			"coordination.lock.hold_time":    2, // the release and the loss
			"coordination.lock.lost":         1,
		}
		for name, n := range want {
			if got[name] != n {
				t.Errorf("%s = %d, want %d (all: %v)", name, got[name], n, got)
			}
		}
		if got["coordination.operation.duration"] < 5 {
			t.Errorf("operation.duration recorded %d operations", got["coordination.operation.duration"])
		}
	})
}

func checkAttrs(t *testing.T, name string, set attribute.Set) {
	t.Helper()
	for _, kv := range set.ToSlice() {
		switch kv.Key {
		case "kind", "result":
		default:
			t.Errorf("%s has attribute %s=%s; only kind and result are allowed", name, kv.Key, kv.Value.Emit())
		}
	}
	if v, ok := set.Value("kind"); !ok || v.AsString() != "lock" {
		t.Errorf("%s: kind = %v, want lock", name, v.Emit())
	}
}
