package ratelimit

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"time"

	coordination "github.com/coordkit/coordination"
)

// Policy is one rate-limiting layer of an HTTP handler (see
// [NewMiddleware]). Set exactly one of Limiter (one budget shared by every
// request, e.g. a service-wide concurrency guard) or Partitioned with
// Partition (one budget per client, tenant or user).
type Policy struct {
	// Name identifies the policy in errors. Optional.
	Name string
	// Limiter is the limiter every request of this policy uses.
	Limiter Limiter
	// Partitioned holds one limiter per partition; Partition picks the
	// partition of a request.
	Partitioned *Partitioned
	// Partition returns the request's partition: an authenticated tenant,
	// client or subject, or a normalized address such as [ClientIP]. It is
	// required with Partitioned. Never return raw credentials or arbitrary
	// headers: every distinct value creates state.
	Partition func(*http.Request) string
	// Permits returns the permits a request costs. Nil means 1.
	Permits func(*http.Request) int
	// Wait makes the policy queue requests with [Limiter.Wait] (the
	// limiter needs [WithQueue]) instead of refusing at once.
	Wait bool
	// Status is the status of a refusal: 0 means 429 Too Many Requests
	// (the caller exhausted its budget); use 503 Service Unavailable for a
	// service-wide guard (the service is saturated). Only 429 and 503 are
	// accepted.
	Status int
}

// NewMiddleware returns net/http middleware that applies policies in order
// before calling the next handler. A request passes only when every policy
// grants it; the first refusal answers it and stops the chain. Concurrency
// leases are released when the handler returns, or at once when a later
// policy refuses (put concurrency guards first: consumed window or bucket
// permits are not given back).
//
// For different policies per route, wrap each route's handler with its own
// middleware:
//
//	standard, _ := ratelimit.NewMiddleware(guard, perClient)
//	expensive, _ := ratelimit.NewMiddleware(guard, perClient, reports)
//	mux.Handle("GET /catalog", standard(catalog))
//	mux.Handle("POST /reports", expensive(createReport))
//
// A refused request gets the policy's status (429 or 503), Cache-Control:
// no-store, a Retry-After header in whole seconds (rounded up, at least 1)
// only when the lease carries a RetryAfter, and an RFC 9457
// application/problem+json body with type, title, status, detail and
// instance (the request path); no partition, key or limit is disclosed.
// When a limiter fails (its failure mode is ReturnError), the answer is a
// 503 problem without Retry-After. When the request's context ends while
// waiting, nothing is written.
//
// Errors: coordination.ErrInvalidArgument when no policy is given, or a
// policy sets both or neither of Limiter and Partitioned, lacks Partition,
// sets Wait on a limiter without a queue, or has another Status.
func NewMiddleware(policies ...Policy) (func(http.Handler) http.Handler, error) {
	if len(policies) == 0 {
		return nil, coordination.InvalidArgument("policies", "give at least one policy")
	}
	ps := make([]Policy, len(policies))
	for i, p := range policies {
		name := "policy " + strconv.Itoa(i)
		if p.Name != "" {
			name = "policy " + p.Name
		}
		if (p.Limiter == nil) == (p.Partitioned == nil) {
			return nil, coordination.InvalidArgument(name, "set exactly one of Limiter and Partitioned")
		}
		if p.Partitioned != nil && p.Partition == nil {
			return nil, coordination.InvalidArgument(name, "Partitioned needs a Partition function")
		}
		if l, ok := p.Limiter.(*limiter); ok && p.Wait && l.opts.queueLimit == 0 {
			return nil, coordination.InvalidArgument(name, "Wait needs a limiter with a queue (WithQueue)")
		}
		switch p.Status {
		case 0:
			p.Status = http.StatusTooManyRequests
		case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		default:
			return nil, coordination.InvalidArgument(name, "status must be 429 or 503, got %d", p.Status)
		}
		ps[i] = p
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var held []Lease
			defer func() { releaseAll(held) }()
			for _, p := range ps {
				lease, err := p.acquire(r)
				if err != nil {
					if r.Context().Err() != nil {
						return // the client is gone: nobody reads an answer
					}
					writeProblem(w, r, http.StatusServiceUnavailable, 0, false)
					return
				}
				if !lease.Acquired() {
					ra, ok := lease.RetryAfter()
					writeProblem(w, r, p.Status, ra, ok)
					return
				}
				if lease.held != nil {
					held = append(held, lease)
				}
			}
			next.ServeHTTP(w, r)
		})
	}, nil
}

func (p *Policy) acquire(r *http.Request) (Lease, error) {
	n := 1
	if p.Permits != nil {
		n = p.Permits(r)
	}
	ctx := r.Context()
	switch {
	case p.Limiter != nil && p.Wait:
		return p.Limiter.Wait(ctx, n)
	case p.Limiter != nil:
		return p.Limiter.Acquire(ctx, n)
	case p.Wait:
		return p.Partitioned.Wait(ctx, p.Partition(r), n)
	default:
		return p.Partitioned.Acquire(ctx, p.Partition(r), n)
	}
}

// releaseAll releases concurrency leases after the handler, even when the
// request's context has ended, bounded by a few seconds.
func releaseAll(ls []Lease) {
	if len(ls) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, l := range ls {
		_ = l.Release(ctx)
	}
}

// problem is an RFC 9457 problem details object.
type problem struct {
	Type     string `json:"type"`
	Title    string `json:"title"`
	Status   int    `json:"status"`
	Detail   string `json:"detail"`
	Instance string `json:"instance,omitempty"`
}

// RetryAfterSeconds converts a lease's RetryAfter into the value of an HTTP
// Retry-After header: whole seconds, rounded up, at least 1.
func RetryAfterSeconds(d time.Duration) int64 {
	s := int64((d + time.Second - 1) / time.Second)
	return max(s, 1)
}

func writeProblem(w http.ResponseWriter, r *http.Request, status int, retry time.Duration, hasRetry bool) {
	p := problem{Status: status, Instance: r.URL.Path}
	switch status {
	case http.StatusTooManyRequests:
		p.Type = "https://www.rfc-editor.org/rfc/rfc6585#section-4"
		p.Title = "Too Many Requests"
		p.Detail = "The request exceeds the current rate limit."
	default:
		p.Type = "https://www.rfc-editor.org/rfc/rfc9110#section-15.6.4"
		p.Title = "Service Unavailable"
		p.Detail = "The service cannot accept more work right now."
	}
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	if hasRetry {
		h.Set("Retry-After", strconv.FormatInt(RetryAfterSeconds(retry), 10))
	}
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(p)
}

// ClientIP returns the normalized address of the request's immediate peer
// (r.RemoteAddr without its port; an IPv4-mapped IPv6 address becomes plain
// IPv4), or "unknown" when it cannot be parsed. It does not read
// X-Forwarded-For or similar headers: clients control them. Behind a
// proxy, set r.RemoteAddr from a trusted forwarded header before this
// middleware runs.
func ClientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return "unknown"
	}
	return a.Unmap().WithZone("").String()
}
