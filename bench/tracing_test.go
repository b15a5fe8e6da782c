package bench

import (
	"context"
	"os"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	coordination "github.com/coordkit/coordination"
)

// tracingOptions returns the coordinator options of BENCH_TRACING, the
// tracer the lock and rate-limit benchmarks run with: empty for none (the
// global provider, a no-op: no SDK is installed), "noop" for an explicit
// no-op provider, "never" for an SDK provider sampling nothing, "always"
// for one sampling everything, each span exported (synchronously, at its
// end) to an exporter that drops it.
func tracingOptions(b *testing.B) []coordination.Option {
	var sampler sdktrace.Sampler
	switch v := os.Getenv("BENCH_TRACING"); v {
	case "":
		return nil
	case "noop":
		return []coordination.Option{coordination.WithTracerProvider(tracenoop.NewTracerProvider())}
	case "never":
		sampler = sdktrace.NeverSample()
	case "always":
		sampler = sdktrace.AlwaysSample()
	default:
		b.Fatalf("BENCH_TRACING=%q: want empty, noop, never or always", v)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sampler), sdktrace.WithSyncer(dropSpans{}))
	b.Cleanup(func() { _ = tp.Shutdown(b.Context()) })
	return []coordination.Option{coordination.WithTracerProvider(tp)}
}

// dropSpans is a span exporter that drops every span.
type dropSpans struct{}

func (dropSpans) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (dropSpans) Shutdown(context.Context) error                             { return nil }
