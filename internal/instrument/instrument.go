// Package instrument is the library's instrument registry: every
// OpenTelemetry instrument of the library is declared once, as a [Metric]
// made with [New] or [NewLease] by the package that records it, and listed
// in [Table], the one table of names the docs reproduce. The engine creates
// the instruments of a declaration with [Create]. It knows no primitive and
// no engine.
package instrument

import (
	"context"
	"slices"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
)

// Scope is the OpenTelemetry instrumentation scope of every instrument
// of the library.
const Scope = "github.com/coordkit/coordination"

// Kind is the instrument type of a [Metric].
type Kind int

// The instrument types.
const (
	Counter Kind = iota
	Histogram
	UpDownCounter
)

// Metric describes one instrument. Every instrument of the library is
// declared once, by the package that records it (the engine's own here, a
// primitive's in its package, with [New] or [NewLease]), and
// listed in [Table]: the one table of names that the docs reproduce (a
// test checks that docs/metrics.md lists exactly these).
type Metric struct {
	Name        string
	Kind        Kind
	Unit        string
	Attributes  string // the attribute keys, comma-separated; never keys, tokens, identities or endpoints
	Description string
}

// Table lists every instrument of the library declared by the packages of
// the program, sorted by name (so its order does not depend on the order
// in which packages initialise). Read it only after initialisation.
var Table []*Metric

// New declares one instrument and adds it to [Table]: name is
// coordination.<primitive>.<what>, unit a UCUM unit ("s" for the duration
// histograms, whose buckets are [durationBuckets]; "{thing}" for counts),
// attrs the attribute keys, comma-separated (never keys, tokens,
// identities or endpoints), desc one sentence for the docs. Call it only
// to initialise a package variable (it is not safe for concurrent use);
// each name once.
func New(kind Kind, name, unit, attrs, desc string) *Metric {
	return def(kind, name, unit, attrs, desc)
}

func def(kind Kind, name, unit, attrs, desc string) *Metric {
	m := &Metric{Name: name, Kind: kind, Unit: unit, Attributes: attrs, Description: desc}
	i, _ := slices.BinarySearchFunc(Table, name, func(t *Metric, n string) int { return strings.Compare(t.Name, n) })
	Table = slices.Insert(Table, i, m)
	return m
}

// durationBuckets are the histogram bucket boundaries, in seconds, of the
// library's wait-time and hold-time histograms: 100 µs to 10 minutes.
var durationBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 600}

// Lease holds the instruments of one family of held leases. Active, an
// UpDownCounter of the leases held now, is optional: nil unless the
// family's package declares it with [New].
type Lease struct {
	Wait, Contention, Hold, RenewalFailures, Lost *Metric
	Active                                        *Metric
}

// NewLease declares, with [New], the five instruments of a
// family of held leases recorded by the engine's LeaseKind: coordination.<family>.
// acquire_wait (histogram, s, attrs plus result), contention (counter, its
// description the sentence contention), hold_time (histogram, s),
// renewal_failures and lost (counters), each described with thing (e.g.
// "semaphore permit") and carrying the attribute keys attrs (may be empty).
// Like New, call it only to initialise a package variable.
func NewLease(family, thing, attrs, contention string) Lease {
	return leaseFamily(family, thing, attrs, contention)
}

func leaseFamily(family, thing, attrs, contention string) Lease {
	p := "coordination." + family + "."
	withResult := "result"
	if attrs != "" {
		withResult = attrs + ", result"
	}
	return Lease{
		Wait:            def(Histogram, p+"acquire_wait", "s", withResult, "Time spent blocked waiting for a "+thing+", by result (acquired, gave_up)."),
		Contention:      def(Counter, p+"contention", "{acquisition}", attrs, contention),
		Hold:            def(Histogram, p+"hold_time", "s", attrs, "Time from acquiring a "+thing+" to releasing or losing it."),
		RenewalFailures: def(Counter, p+"renewal_failures", "{renewal}", attrs, "Keep-alive renewals of a "+thing+" that failed (lost, terminal or transient error)."),
		Lost:            def(Counter, p+"lost", "{lease}", attrs, "Each "+thing+" lost while held: expired, taken over, or renewal impossible."),
	}
}

// Create makes the instrument m describes with meter (the histograms of
// unit "s" with [durationBuckets]); a provider error gives a no-op instrument:
// telemetry never fails an operation.
func Create(meter metric.Meter, m *Metric) any {
	nop := noop.NewMeterProvider().Meter(Scope)
	switch m.Kind {
	case Histogram:
		opts := []metric.Float64HistogramOption{metric.WithDescription(m.Description), metric.WithUnit(m.Unit)}
		if m.Unit == "s" {
			opts = append(opts, metric.WithExplicitBucketBoundaries(durationBuckets...))
		}
		h, err := meter.Float64Histogram(m.Name, opts...)
		if err != nil {
			h, _ = nop.Float64Histogram(m.Name)
		}
		return h
	case UpDownCounter:
		c, err := meter.Int64UpDownCounter(m.Name, metric.WithDescription(m.Description), metric.WithUnit(m.Unit))
		if err != nil {
			c, _ = nop.Int64UpDownCounter(m.Name)
		}
		return c
	default:
		c, err := meter.Int64Counter(m.Name, metric.WithDescription(m.Description), metric.WithUnit(m.Unit))
		if err != nil {
			c, _ = nop.Int64Counter(m.Name)
		}
		return c
	}
}

// Attrs returns a measurement option with the given attributes, built once
// by the caller and reused.
func Attrs(kv ...attribute.KeyValue) metric.MeasurementOption {
	return metric.WithAttributeSet(attribute.NewSet(kv...))
}

// TraceID returns the W3C trace id (32 lower-case hex digits) of ctx's
// span, or "" when ctx carries no valid span context: what the HTTP
// middlewares put in their problem bodies.
func TraceID(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return ""
	}
	return sc.TraceID().String()
}
