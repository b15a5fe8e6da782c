package ratelimit

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/engine"
)

// DefaultLeaseDuration is the lease duration of a [Concurrency] limiter
// whose LeaseDuration is zero.
const DefaultLeaseDuration = 30 * time.Second

// minLeaseDuration is the shortest lease: renewals run every third of it,
// and must have time for a round trip.
const minLeaseDuration = 30 * time.Millisecond

// concKind is the concurrency lease's kind: its hook names, scripts and
// instruments (coordination.rate_limit.concurrency.*). Leases are acquired
// unadmitted: [Limiter.Allow] and [Limiter.Wait] are admitted once as RATE
// LIMIT ACQUIRE themselves. Keep-alive renewals are not admitted; releases
// are RATE LIMIT RELEASE. Concurrency leases have no verify operation.
var concKind = &engine.LeaseKind{
	Primitive: primitive,
	AcquireOp: hooks.RateLimitAcquire, RenewOp: hooks.RateLimitRenew, ReleaseOp: hooks.RateLimitRelease,
	Acquire: engine.RateLimitConcAcquire, Refresh: engine.RateLimitConcRenew, Release: engine.RateLimitConcRelease,
	Metrics: engine.RateLimitConcurrencyMetrics,
}

// Attributes of the concurrency wait histogram, built once.
var (
	waitAcquired = engine.Attrs(attribute.String("result", "acquired"))
	waitGaveUp   = engine.Attrs(attribute.String("result", "gave_up"))
)

// concTry asks a concurrency limiter once: a probe runs the acquire script
// directly (it holds nothing); a request for permits is an engine lease
// acquisition, unadmitted, with a fresh member.
func (l *Limiter) concTry(ctx context.Context, sp *spec, permits int) (decision, error) {
	strict := "0"
	if l.opts.strict {
		strict = "1"
	}
	limit := int64(sp.capacity)
	if permits == 0 {
		g, err := engine.RateLimitConcAcquire.Run(ctx, l.e, l.keys, "", sp.leaseMs, limit, 0, strict)
		if err != nil {
			return decision{}, err
		}
		return concDecision(g), nil
	}
	token, err := newToken()
	if err != nil {
		return decision{}, err
	}
	member := strconv.Itoa(permits) + ":" + token
	h, g, err := l.e.Acquire(ctx, &engine.AcquireRequest{
		Kind: concKind, Keys: l.keys, ID: []any{member}, TTL: time.Duration(sp.leaseMs) * time.Millisecond,
		Extra: []any{limit, permits, strict}, Unadmitted: true,
	})
	if errors.Is(err, engine.ErrNotAcquired) {
		return concDecision(g), nil
	}
	if err != nil {
		return decision{}, err
	}
	d := concDecision(g)
	hd := &held{l: l, h: h}
	if l.remember(hd) {
		h.KeepAlive()
	} else {
		h.Lose(errClosedLease) // closed meanwhile: not renewed
	}
	d.held = hd
	return d, nil
}

func concDecision(g engine.Grant) decision {
	return decision{acquired: g.Acquired, available: engine.ConcAvailable(g), hint: g.RetryIn}
}

// newToken returns a lease member's random part: 16 random bytes (128
// bits) in 22 characters, shorter than a UUID, so every live lease costs
// fewer bytes in the sorted set.
func newToken() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("ratelimit: lease token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// recordWait records the time a concurrency request spent in the queue.
func (l *Limiter) recordWait(start time.Time, acquired bool) {
	if l.spec().alg != algConc {
		return
	}
	a := waitGaveUp
	if acquired {
		a = waitAcquired
	}
	l.e.Histogram(engine.RateLimitConcurrencyMetrics.Wait).Record(context.Background(), time.Since(start).Seconds(), a)
}
