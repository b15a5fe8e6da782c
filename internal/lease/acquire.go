package lease

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/waitloop"
)

// TryFunc runs the acquire script once with the given owner token and TTL.
// It reports whether the lease was acquired, and when not, the holder's
// remaining TTL (0 when unknown or none).
type TryFunc func(ctx context.Context, token string, ttlMs int64) (acquired bool, retryIn time.Duration, err error)

// AcquireSpec describes one acquisition.
type AcquireSpec struct {
	Op, Primitive string        // hook operation name and primitive kind
	Key           string        // unprefixed key whose release channel waiters watch
	TTL           time.Duration // validated by the caller
	Token         string        // owner token; empty means a fresh random one
	Try           TryFunc
	// NoExpiry accepts a TTL of 0, meaning "until released"; Try then
	// receives ttlMs 0.
	NoExpiry bool
	// Cleanup releases the lease owner-checked with the given token. It is
	// run in the background when an attempt's outcome was ambiguous and the
	// caller gets an error, so that a lease acquired by a lost reply does
	// not linger until its TTL.
	Cleanup func(ctx context.Context, token string) error
	Metrics AcquireMetrics
	Wait    waitloop.Config
}

// AcquireMetrics are the acquisition instruments; nil fields are skipped.
type AcquireMetrics struct {
	Wait       metric.Float64Histogram // seconds spent in a blocking acquire, by result
	Contention metric.Int64Counter     // acquisitions that found the lease held (once per operation)
	Attrs      []attribute.KeyValue    // e.g. kind=lock
}

// Acquired is the result of a successful acquisition.
type Acquired struct {
	Token string
	Sent  time.Time // the instant before the successful request was sent
}

// Acquire admits spec.Op once and acquires the lease: one attempt when block
// is false (contention returns coordination.ErrNotAcquired), or waiting on
// release notifications until acquired or ctx ends when block is true.
func Acquire(ctx context.Context, coord *coordination.Coordinator, spec AcquireSpec, block bool) (Acquired, error) {
	ttlMs, err := TTLMillis(spec.TTL, spec.NoExpiry)
	if err != nil {
		return Acquired{}, err
	}
	token := spec.Token
	if token == "" {
		if token, err = coordination.NewOwnerToken(); err != nil {
			return Acquired{}, err
		}
	}
	ctx, finish, err := coord.Admit(ctx, spec.Op, spec.Primitive)
	if err != nil {
		return Acquired{}, err
	}
	start := time.Now()
	var (
		sent      time.Time
		ambiguous bool
	)
	try := func(ctx context.Context) (waitloop.Attempt, error) {
		sent = time.Now()
		ok, retryIn, err := spec.Try(ctx, token, ttlMs)
		ambiguous = coordination.IsAmbiguous(err)
		if err != nil {
			return waitloop.Attempt{}, err
		}
		return waitloop.Attempt{Done: ok, RetryIn: retryIn}, nil
	}
	counted := false
	contended := func() { // once per operation, however many attempts
		if spec.Metrics.Contention != nil && !counted {
			counted = true
			spec.Metrics.Contention.Add(context.Background(), 1, metric.WithAttributes(spec.Metrics.Attrs...))
		}
	}
	if block {
		wc := spec.Wait
		wc.OnContended = contended
		err = waitloop.Run(ctx, coord, spec.Key, wc, try)
	} else {
		var a waitloop.Attempt
		a, err = try(ctx)
		if err == nil && !a.Done {
			contended()
			err = coordination.ErrNotAcquired
		}
	}
	if block && spec.Metrics.Wait != nil {
		result := "acquired"
		if err != nil {
			result = "gave_up"
		}
		spec.Metrics.Wait.Record(context.Background(), time.Since(start).Seconds(),
			metric.WithAttributes(append(spec.Metrics.Attrs, attribute.String("result", result))...))
	}
	if err != nil {
		if ambiguous && spec.Cleanup != nil {
			Cleanup(coord, "acquire", func(ctx context.Context) error { return spec.Cleanup(ctx, token) })
		}
		if errors.Is(err, coordination.ErrNotAcquired) && !block {
			finish(nil) // contention is a successful answer
			return Acquired{}, err
		}
		return Acquired{}, finish(err)
	}
	finish(nil)
	return Acquired{Token: token, Sent: sent}, nil
}

// CleanupLimit bounds how long background cleanup keeps retrying.
const CleanupLimit = time.Minute

// Cleanup runs fn in the background until it succeeds, fails terminally, or
// CleanupLimit passes, retrying transient errors with jittered backoff. Each
// try is bounded by 5 s. When it gives up it counts
// coordination.cleanup.abandoned{stage, reason} and logs a warning.
func Cleanup(coord *coordination.Coordinator, stage string, fn func(context.Context) error) {
	go func() {
		deadline := time.Now().Add(CleanupLimit)
		delay := 50 * time.Millisecond
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err := fn(ctx)
			cancel()
			if err == nil {
				return
			}
			class := coordination.Classify(err)
			if class == coordination.Terminal || time.Now().Add(delay).After(deadline) {
				reason := "terminal_error"
				if class != coordination.Terminal {
					reason = "deadline"
				}
				coord.Int64Counter("coordination.cleanup.abandoned",
					"Background owner-checked cleanups given up (the lease then ends at its TTL).", "{cleanup}").
					Add(context.Background(), 1, metric.WithAttributes(attribute.String("stage", stage), attribute.String("reason", reason)))
				coord.Logger().Warn("coordination: cleanup abandoned; the lease will end at its TTL",
					"stage", stage, "reason", reason, "error_class", class.String())
				return
			}
			time.Sleep(delay/2 + rand.N(delay/2+1))
			delay = min(delay*2, 5*time.Second)
		}
	}()
}
