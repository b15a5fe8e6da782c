package coordination

import (
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
)

// Int64Counter returns the coordinator's counter of that name, creating it
// on first use; later calls with the same name return the same instrument
// whatever their description and unit. Names follow
// coordination.<primitive>.<what>. If the meter provider fails to create
// it, a no-op counter is returned: telemetry never fails an operation.
func (c *Coordinator) Int64Counter(name, description, unit string) metric.Int64Counter {
	c.instMu.Lock()
	defer c.instMu.Unlock()
	if v, ok := c.inst[name].(metric.Int64Counter); ok {
		return v
	}
	v, err := c.meter.Int64Counter(name, metric.WithDescription(description), metric.WithUnit(unit))
	if err != nil {
		v, _ = noop.NewMeterProvider().Meter("").Int64Counter(name)
	}
	c.inst[name] = v
	return v
}

// Float64Histogram returns the coordinator's histogram of that name,
// creating it on first use with the given explicit bucket boundaries (none
// means the SDK's default). Like [Coordinator.Int64Counter], it never fails.
func (c *Coordinator) Float64Histogram(name, description, unit string, buckets ...float64) metric.Float64Histogram {
	c.instMu.Lock()
	defer c.instMu.Unlock()
	if v, ok := c.inst[name].(metric.Float64Histogram); ok {
		return v
	}
	opts := []metric.Float64HistogramOption{metric.WithDescription(description), metric.WithUnit(unit)}
	if len(buckets) > 0 {
		opts = append(opts, metric.WithExplicitBucketBoundaries(buckets...))
	}
	v, err := c.meter.Float64Histogram(name, opts...)
	if err != nil {
		v, _ = noop.NewMeterProvider().Meter("").Float64Histogram(name)
	}
	c.inst[name] = v
	return v
}

// Int64UpDownCounter returns the coordinator's up-down counter of that name,
// creating it on first use. Like [Coordinator.Int64Counter], it never fails.
func (c *Coordinator) Int64UpDownCounter(name, description, unit string) metric.Int64UpDownCounter {
	c.instMu.Lock()
	defer c.instMu.Unlock()
	if v, ok := c.inst[name].(metric.Int64UpDownCounter); ok {
		return v
	}
	v, err := c.meter.Int64UpDownCounter(name, metric.WithDescription(description), metric.WithUnit(unit))
	if err != nil {
		v, _ = noop.NewMeterProvider().Meter("").Int64UpDownCounter(name)
	}
	c.inst[name] = v
	return v
}

// DurationBuckets are the histogram bucket boundaries, in seconds, used for
// the library's wait-time and hold-time histograms: 100 µs to 10 minutes.
var DurationBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 600}
