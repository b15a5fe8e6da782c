package lease

import (
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	coordination "github.com/coordkit/coordination"
)

// LockInstruments returns the coordination.lock.* instruments shared by the
// owner-token lock and the fencing lock, with attribute kind set to kind:
//
//	coordination.lock.acquire_wait      histogram, s: time blocked in Acquire (attribute result=acquired|gave_up)
//	coordination.lock.hold_time         histogram, s: from acquisition to release or loss
//	coordination.lock.contention        counter: acquisitions (TryAcquire or Acquire) that found the lock held
//	coordination.lock.renewal_failures  counter: keep-alive renewals that failed
//	coordination.lock.lost              counter: locks lost while held (expired, taken over, renewal impossible)
func LockInstruments(coord *coordination.Coordinator, kind string) (AcquireMetrics, Metrics) {
	v := coord.Instruments("lock:"+kind, func() any { return buildLockInstruments(coord, kind) }).(lockInstruments)
	return v.am, v.m
}

type lockInstruments struct {
	am AcquireMetrics
	m  Metrics
}

func buildLockInstruments(coord *coordination.Coordinator, kind string) lockInstruments {
	attrs := []attribute.KeyValue{attribute.String("kind", kind)}
	return lockInstruments{AcquireMetrics{
		Wait: coord.Float64Histogram("coordination.lock.acquire_wait",
			"Time spent blocked in a lock Acquire, by result.", "s", coordination.DurationBuckets...),
		Contention: coord.Int64Counter("coordination.lock.contention",
			"Lock acquisitions (TryAcquire or Acquire) that found the lock held by another owner.", "{acquisition}"),
		Attrs: attrs,
	}, Metrics{
		Hold: coord.Float64Histogram("coordination.lock.hold_time",
			"Time from acquiring a lock to releasing or losing it.", "s", coordination.DurationBuckets...),
		RenewalFailures: coord.Int64Counter("coordination.lock.renewal_failures",
			"Keep-alive renewals that failed (lost lock, terminal or transient error).", "{renewal}"),
		Lost: coord.Int64Counter("coordination.lock.lost",
			"Locks lost while held: expired, taken over, or renewal impossible.", "{lock}"),
		Attrs: metric.WithAttributeSet(attribute.NewSet(attrs...)),
	}}
}

// RetryIn converts a PTTL reply in milliseconds into the wait before the key
// expires: 0 when it has no TTL (-1) or is gone (-2), at least 1 ms
// otherwise.
func RetryIn(ms int64) time.Duration {
	switch {
	case ms < 0:
		return 0
	case ms == 0:
		return time.Millisecond
	default:
		return time.Duration(ms) * time.Millisecond
	}
}

// Outcome maps a release script's reply (1, 0, -1) to a ReleaseOutcome.
func Outcome(n int64) coordination.ReleaseOutcome {
	switch n {
	case 1:
		return coordination.Released
	case 0:
		return coordination.AlreadyReleased
	default:
		return coordination.NotOwned
	}
}
