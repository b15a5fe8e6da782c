package engine

import (
	"context"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/instrument"
)

// The engine's own instruments, one declaration each.
var (
	operationDuration = instrument.New(instrument.Histogram, "coordination.operation.duration", "s", "operation, outcome",
		"Time from admission to outcome of a coordination operation, including any waiting.")
	cleanupAbandoned = instrument.New(instrument.Counter, "coordination.cleanup.abandoned", "{cleanup}", "stage, reason",
		"Background owner-checked cleanups given up (the lease then ends at its TTL).")
)

// instruments caches the instruments of one engine, created on first use.
// Reads take no lock (a copy-on-write map: every operation reads it, from
// every goroutine).
type instruments struct {
	meter metric.Meter
	mu    sync.Mutex // serialises writers
	m     cowMap[*instrument.Metric, any]
}

func (in *instruments) init(meter metric.Meter) {
	in.meter = meter
}

func (in *instruments) get(m *instrument.Metric) any {
	return in.m.load(&in.mu, m, func() any { return instrument.Create(in.meter, m) })
}

// cowMap is a map read without locks: writers (serialised by the caller)
// replace it with a copy. For small maps written a few times and read on
// every operation.
type cowMap[K comparable, V any] struct {
	p atomic.Pointer[map[K]V]
}

func (c *cowMap[K, V]) get(k K) (V, bool) {
	var zero V
	m := c.p.Load()
	if m == nil {
		return zero, false
	}
	v, ok := (*m)[k]
	return v, ok
}

// load returns k's value; when there is none, it adds mk's, under mu
// (which serialises the writers), and returns it.
func (c *cowMap[K, V]) load(mu *sync.Mutex, k K, mk func() V) V {
	if v, ok := c.get(k); ok {
		return v
	}
	mu.Lock()
	defer mu.Unlock()
	if v, ok := c.get(k); ok {
		return v
	}
	v := mk()
	c.put(k, v)
	return v
}

// put adds k; callers serialise puts.
func (c *cowMap[K, V]) put(k K, v V) {
	old := c.p.Load()
	m := make(map[K]V, 1)
	if old != nil {
		m = maps.Clone(*old)
	}
	m[k] = v
	c.p.Store(&m)
}

// Add adds n to m, an instrument.Counter (n >= 0) or an
// instrument.UpDownCounter metric (negative to subtract), with opts (a
// slice built once: passing it with ... allocates nothing).
func (e *Engine) Add(m *instrument.Metric, n int64, opts ...metric.AddOption) {
	switch c := e.inst.get(m).(type) {
	case metric.Int64Counter:
		c.Add(context.Background(), n, opts...)
	case metric.Int64UpDownCounter:
		c.Add(context.Background(), n, opts...)
	}
}

// Histogram returns the engine's histogram for m (an instrument.Histogram metric).
func (e *Engine) Histogram(m *instrument.Metric) metric.Float64Histogram {
	return e.inst.get(m).(metric.Float64Histogram)
}

// Count adds 1 to m with attrs (nil: none).
func (e *Engine) Count(m *instrument.Metric, attrs metric.MeasurementOption) {
	c := e.inst.get(m).(metric.Int64Counter)
	if attrs == nil {
		c.Add(context.Background(), 1)
		return
	}
	c.Add(context.Background(), 1, attrs)
}

// durationRecorder records coordination.operation.duration with cached
// attribute sets per (operation, outcome).
type durationRecorder struct {
	h     metric.Float64Histogram
	mu    sync.Mutex // serialises writers of attrs
	attrs cowMap[durKey, []metric.RecordOption]
}

type durKey struct {
	op string
	o  hooks.Outcome
}

func newDurationRecorder(meter metric.Meter) *durationRecorder {
	h, err := meter.Float64Histogram(operationDuration.Name,
		metric.WithDescription(operationDuration.Description), metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60))
	if err != nil {
		h, _ = noop.NewMeterProvider().Meter(instrument.Scope).Float64Histogram(operationDuration.Name)
	}
	return &durationRecorder{h: h}
}

func (r *durationRecorder) record(op string, o hooks.Outcome, d time.Duration) {
	v := r.attrs.load(&r.mu, durKey{op, o}, func() []metric.RecordOption {
		return []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(attribute.String("operation", op), attribute.String("outcome", o.String())))}
	})
	r.h.Record(context.Background(), d.Seconds(), v...)
}
