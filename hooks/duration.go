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

// DurationMetric is the name of the histogram recorded by [Duration].
const DurationMetric = "coordination.operation.duration"

// Duration returns a hook that records, for every admitted operation, the
// time from admission to outcome in the OpenTelemetry histogram
// coordination.operation.duration (unit "s", seconds). Its attributes are
// operation (the operation name, e.g. "LOCK ACQUIRE") and outcome
// ("succeeded", "canceled", "failed"); never a key, token or endpoint.
//
// A blocking acquire that waits is recorded once, with its whole wait. A nil
// provider means the no-op provider. Duration never rejects an operation.
// The hook is safe for concurrent use.
func Duration(provider metric.MeterProvider) Hook {
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
	return &durationHook{h: h}
}

type durationHook struct {
	h     metric.Float64Histogram
	attrs sync.Map // attrKey -> metric.MeasurementOption
}

type attrKey struct {
	op      string
	outcome Outcome
}

func (d *durationHook) option(op string, o Outcome) metric.MeasurementOption {
	k := attrKey{op, o}
	if v, ok := d.attrs.Load(k); ok {
		return v.(metric.MeasurementOption)
	}
	v := metric.WithAttributeSet(attribute.NewSet(attribute.String("operation", op), attribute.String("outcome", o.String())))
	d.attrs.Store(k, v)
	return v
}

func (d *durationHook) Admit(ctx context.Context, op Operation) (context.Context, Done, error) {
	start := time.Now()
	return ctx, func(o Outcome, _ error) {
		d.h.Record(context.Background(), time.Since(start).Seconds(), d.option(op.Name, o))
	}, nil
}
