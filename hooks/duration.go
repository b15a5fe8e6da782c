package hooks

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
)

// ScopeName is the OpenTelemetry instrumentation scope under which every
// instrument of this module is created.
const ScopeName = "github.com/coordkit/coordination"

// DurationMetric is the name of the histogram recorded by [Duration] and
// [DurationRecorder].
const DurationMetric = "coordination.operation.duration"

// DurationRecorder records the OpenTelemetry histogram
// coordination.operation.duration (unit "s", seconds) with the attributes
// operation (the operation name, e.g. "LOCK ACQUIRE") and outcome
// ("succeeded", "canceled", "failed"); never a key, token or endpoint. The
// coordinator records every admitted operation with one. It is safe for
// concurrent use.
type DurationRecorder struct {
	h     metric.Float64Histogram
	mu    sync.RWMutex
	attrs map[attrKey][]metric.RecordOption
}

type attrKey struct {
	op      string
	outcome Outcome
}

// NewDurationRecorder creates the histogram from provider (nil means the
// no-op provider). It never fails: if the provider cannot create the
// instrument, recording does nothing.
func NewDurationRecorder(provider metric.MeterProvider) *DurationRecorder {
	if provider == nil {
		provider = noop.NewMeterProvider()
	}
	h, err := provider.Meter(ScopeName).Float64Histogram(DurationMetric,
		metric.WithDescription("Time from admission to outcome of a coordination operation, including any waiting."),
		metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60))
	if err != nil {
		h, _ = noop.NewMeterProvider().Meter(ScopeName).Float64Histogram(DurationMetric)
	}
	return &DurationRecorder{h: h, attrs: map[attrKey][]metric.RecordOption{}}
}

// Record records one operation that took d and ended with outcome o.
func (r *DurationRecorder) Record(op string, o Outcome, d time.Duration) {
	r.h.Record(context.Background(), d.Seconds(), r.options(op, o)...)
}

// options returns the cached attribute option of (op, o), as a slice so
// that recording does not allocate one.
func (r *DurationRecorder) options(op string, o Outcome) []metric.RecordOption {
	k := attrKey{op, o}
	r.mu.RLock()
	v, ok := r.attrs[k]
	r.mu.RUnlock()
	if ok {
		return v
	}
	v = []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(attribute.String("operation", op), attribute.String("outcome", o.String())))}
	r.mu.Lock()
	r.attrs[k] = v
	r.mu.Unlock()
	return v
}

// Duration returns a hook that records every admitted operation's time
// from admission to outcome with a [DurationRecorder] over provider. A
// blocking acquire that waits is recorded once, with its whole wait. It
// never rejects an operation and is safe for concurrent use.
//
// The coordinator already records this histogram for its own operations;
// use Duration to record it from hooks you chain elsewhere.
func Duration(provider metric.MeterProvider) Hook {
	return durationHook{NewDurationRecorder(provider)}
}

type durationHook struct{ r *DurationRecorder }

// Admit records the start time and returns a Done that records the duration.
func (d durationHook) Admit(ctx context.Context, op Operation) (context.Context, Done, error) {
	start := time.Now()
	return ctx, func(o Outcome, _ error) { d.r.Record(op.Name, o, time.Since(start)) }, nil
}
