package engine

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/coordkit/coordination/hooks"
)

// scopeName is the OpenTelemetry instrumentation scope of every instrument
// of the library.
const scopeName = "github.com/coordkit/coordination"

// MetricKind is the instrument type of a [Metric].
type MetricKind int

// The instrument types.
const (
	Counter MetricKind = iota
	Histogram
	UpDownCounter
)

// Metric describes one instrument. Every instrument of the library is
// declared once, by the package that records it (the engine's own here, a
// primitive's in its package, with [NewMetric] or [NewLeaseMetrics]), and
// listed in [Table]: the one table of names that the docs reproduce (a
// test checks that the README lists exactly these).
type Metric struct {
	Name        string
	Kind        MetricKind
	Unit        string
	Attributes  string // the attribute keys, comma-separated; never keys, tokens, identities or endpoints
	Description string
}

// Table lists every instrument of the library declared by the packages of
// the program, sorted by name (so its order does not depend on the order
// in which packages initialise). Read it only after initialisation.
var Table []*Metric

// NewMetric declares one instrument and adds it to [Table]: name is
// coordination.<primitive>.<what>, unit a UCUM unit ("s" for the duration
// histograms, whose buckets are [durationBuckets]; "{thing}" for counts),
// attrs the attribute keys, comma-separated (never keys, tokens,
// identities or endpoints), desc one sentence for the docs. Call it only
// to initialise a package variable (it is not safe for concurrent use);
// each name once.
func NewMetric(kind MetricKind, name, unit, attrs, desc string) *Metric {
	return def(kind, name, unit, attrs, desc)
}

func def(kind MetricKind, name, unit, attrs, desc string) *Metric {
	m := &Metric{Name: name, Kind: kind, Unit: unit, Attributes: attrs, Description: desc}
	i, _ := slices.BinarySearchFunc(Table, name, func(t *Metric, n string) int { return strings.Compare(t.Name, n) })
	Table = slices.Insert(Table, i, m)
	return m
}

// durationBuckets are the histogram bucket boundaries, in seconds, of the
// library's wait-time and hold-time histograms: 100 µs to 10 minutes.
var durationBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 600}

// LeaseMetrics are the instruments of one family of held leases.
type LeaseMetrics struct {
	Wait, Contention, Hold, RenewalFailures, Lost *Metric
}

// NewLeaseMetrics declares, with [NewMetric], the five instruments of a
// family of held leases recorded by [LeaseKind]: coordination.<family>.
// acquire_wait (histogram, s, attrs plus result), contention (counter, its
// description the sentence contention), hold_time (histogram, s),
// renewal_failures and lost (counters), each described with thing (e.g.
// "semaphore permit") and carrying the attribute keys attrs (may be empty).
// Like NewMetric, call it only to initialise a package variable.
func NewLeaseMetrics(family, thing, attrs, contention string) LeaseMetrics {
	return leaseFamily(family, thing, attrs, contention)
}

func leaseFamily(family, thing, attrs, contention string) LeaseMetrics {
	p := "coordination." + family + "."
	withResult := "result"
	if attrs != "" {
		withResult = attrs + ", result"
	}
	return LeaseMetrics{
		Wait:            def(Histogram, p+"acquire_wait", "s", withResult, "Time spent blocked waiting for a "+thing+", by result (acquired, gave_up)."),
		Contention:      def(Counter, p+"contention", "{acquisition}", attrs, contention),
		Hold:            def(Histogram, p+"hold_time", "s", attrs, "Time from acquiring a "+thing+" to releasing or losing it."),
		RenewalFailures: def(Counter, p+"renewal_failures", "{renewal}", attrs, "Keep-alive renewals of a "+thing+" that failed (lost, terminal or transient error)."),
		Lost:            def(Counter, p+"lost", "{lease}", attrs, "Each "+thing+" lost while held: expired, taken over, or renewal impossible."),
	}
}

// The engine's own instruments, one declaration each.
var (
	OperationDuration = def(Histogram, "coordination.operation.duration", "s", "operation, outcome",
		"Time from admission to outcome of a coordination operation, including any waiting.")
	cleanupAbandoned = def(Counter, "coordination.cleanup.abandoned", "{cleanup}", "stage, reason",
		"Background owner-checked cleanups given up (the lease then ends at its TTL).")
)

// instruments caches the instruments of one engine, created on first use.
// Reads take no lock (a copy-on-write map: every operation reads it, from
// every goroutine).
type instruments struct {
	meter metric.Meter
	mu    sync.Mutex // serialises writers
	m     cowMap[*Metric, any]
}

func (in *instruments) init(meter metric.Meter) {
	in.meter = meter
}

func (in *instruments) get(m *Metric) any {
	if v, ok := in.m.get(m); ok {
		return v
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if v, ok := in.m.get(m); ok {
		return v
	}
	v := in.create(m)
	in.m.put(m, v)
	return v
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

// create makes the instrument; a provider error gives a no-op instrument:
// telemetry never fails an operation.
func (in *instruments) create(m *Metric) any {
	nop := noop.NewMeterProvider().Meter(scopeName)
	switch m.Kind {
	case Histogram:
		opts := []metric.Float64HistogramOption{metric.WithDescription(m.Description), metric.WithUnit(m.Unit)}
		if m.Unit == "s" {
			opts = append(opts, metric.WithExplicitBucketBoundaries(durationBuckets...))
		}
		h, err := in.meter.Float64Histogram(m.Name, opts...)
		if err != nil {
			h, _ = nop.Float64Histogram(m.Name)
		}
		return h
	case UpDownCounter:
		c, err := in.meter.Int64UpDownCounter(m.Name, metric.WithDescription(m.Description), metric.WithUnit(m.Unit))
		if err != nil {
			c, _ = nop.Int64UpDownCounter(m.Name)
		}
		return c
	default:
		c, err := in.meter.Int64Counter(m.Name, metric.WithDescription(m.Description), metric.WithUnit(m.Unit))
		if err != nil {
			c, _ = nop.Int64Counter(m.Name)
		}
		return c
	}
}

// Counter returns the engine's counter for m (a Counter metric).
func (e *Engine) Counter(m *Metric) metric.Int64Counter { return e.inst.get(m).(metric.Int64Counter) }

// Histogram returns the engine's histogram for m (a Histogram metric).
func (e *Engine) Histogram(m *Metric) metric.Float64Histogram {
	return e.inst.get(m).(metric.Float64Histogram)
}

// Attrs returns a measurement option with the given attributes, built once
// by the caller and reused.
func Attrs(kv ...attribute.KeyValue) metric.MeasurementOption {
	return metric.WithAttributeSet(attribute.NewSet(kv...))
}

// Count adds 1 to m with attrs (nil: none).
func (e *Engine) Count(m *Metric, attrs metric.MeasurementOption) {
	if attrs == nil {
		e.Counter(m).Add(context.Background(), 1)
		return
	}
	e.Counter(m).Add(context.Background(), 1, attrs)
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
	h, err := meter.Float64Histogram(OperationDuration.Name,
		metric.WithDescription(OperationDuration.Description), metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60))
	if err != nil {
		h, _ = noop.NewMeterProvider().Meter(scopeName).Float64Histogram(OperationDuration.Name)
	}
	return &durationRecorder{h: h}
}

func (r *durationRecorder) record(op string, o hooks.Outcome, d time.Duration) {
	k := durKey{op, o}
	v, ok := r.attrs.get(k)
	if !ok {
		v = []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(attribute.String("operation", op), attribute.String("outcome", o.String())))}
		r.mu.Lock()
		if w, ok := r.attrs.get(k); ok {
			v = w
		} else {
			r.attrs.put(k, v)
		}
		r.mu.Unlock()
	}
	r.h.Record(context.Background(), d.Seconds(), v...)
}
