package fencing_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/fencing"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// A counter that went back (here deleted, as a restart without persistence,
// a failover or eviction would lose it) hands token 1 out again: never
// silently. The coordinator that saw the higher token counts it in
// coordination.fencing.counter_resets and logs a warning (without keys or
// tokens); a coordinator that never saw it cannot tell.
func TestCounterThatWentBackIsReported(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		reader := sdkmetric.NewManualReader()
		var logs testharness.LogBuffer
		c := b.Coordinator(t, coordination.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))),
			coordination.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
		m := must(fencing.New(c, "{r}:lease", "{r}:fence"))(t)
		for range 3 {
			l := must(m.TryAcquire(ctx, time.Minute))(t)
			must(l.Release(ctx))(t)
		}
		hash, field := sharedOf(b, "{r}:fence")
		must(b.Client(t).HDel(ctx, hash, field).Result())(t) // the counter is lost
		l := must(m.TryAcquire(ctx, time.Minute))(t)
		if l.FencingToken() != 1 {
			t.Fatalf("token after the counter was lost: %d, want 1 (handed out again)", l.FencingToken())
		}
		var rm metricdata.ResourceMetrics
		must(0, reader.Collect(ctx, &rm))(t)
		var resets int64
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				if m.Name == "coordination.fencing.counter_resets" {
					for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
						resets += p.Value
					}
				}
			}
		}
		if resets != 1 {
			t.Errorf("counter_resets = %d, want 1", resets)
		}
		out := logs.String()
		if !strings.Contains(out, "fencing counter went back") || strings.Contains(out, "{r}") || strings.Contains(out, l.Token()) {
			t.Errorf("log %q: want the warning, without keys or tokens", out)
		}
		must(l.Release(ctx))(t)
		// A fresh coordinator (another process) sees nothing wrong.
		other := must(must(fencing.New(b.Coordinator(t), "{r}:lease", "{r}:fence"))(t).TryAcquire(ctx, time.Minute))(t)
		if other.FencingToken() != 2 {
			t.Errorf("next token %d, want 2", other.FencingToken())
		}
	})
}
