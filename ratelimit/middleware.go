package ratelimit

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/instrument"
)

// Policy is one rate-limiting layer of an HTTP handler (see
// [NewMiddleware]). Set exactly one of Limiter (one budget shared by every
// request), Concurrency (a concurrency guard: a lease held while the
// handler runs, e.g. service-wide), Partitioned with Partition (one
// budget per client, tenant or user) or PartitionedConcurrency with
// Partition (one concurrency guard per partition).
type Policy struct {
	// Name identifies the policy in errors, log lines, the RateLimit
	// headers and the problem body of a refusal ("violated-policies"):
	// give a public name, never a key or a partition. Printable ASCII.
	// Optional: the default is its position, "0", "1" ...
	Name string
	// Limiter is the limiter every request of this policy uses.
	Limiter *Limiter
	// Concurrency is the concurrency limiter every request of this policy
	// takes a lease of: held while the next handler runs, released when it
	// returns.
	Concurrency *ConcurrencyLimiter
	// Partitioned holds one limiter per partition; Partition picks the
	// partition of a request.
	Partitioned *Partitioned
	// PartitionedConcurrency holds one concurrency limiter per partition,
	// picked by Partition; the lease is held while the next handler runs.
	PartitionedConcurrency *PartitionedConcurrency
	// Partition returns the request's partition: an authenticated tenant,
	// client or subject, or a normalized address such as [ClientIP]. It is
	// required with Partitioned and PartitionedConcurrency. Never return raw credentials or arbitrary
	// headers: every distinct value creates state.
	Partition func(*http.Request) string
	// Permits returns the permits a request costs. Nil means 1. A negative
	// number is a bug in the function: the request is answered 500
	// Internal Server Error, the error (naming the policy) is logged once
	// and handed to the error handler, and nothing is consumed. A cost
	// above the limiter's capacity (a composite's smallest) can never be
	// granted, however long the client waits: the request is refused with
	// the policy's status (429 by default), without Retry-After, with a
	// problem body whose detail says that its cost exceeds what the policy
	// ever grants; the middleware logs it at warn, naming the policy, the
	// cost and the capacity (once, then at most once a minute while it
	// repeats: clients choose their requests), sends nothing to Redis for
	// it and gives back the permits earlier policies took. It is not a
	// limiter failure: the error handler does not see it.
	Permits func(*http.Request) int
	// Wait makes requests wait for their permits with [Limiter.Wait] or
	// [ConcurrencyLimiter.Acquire] (bounded by the request's context and
	// the limiter's queue) instead of being refused at once with
	// [Limiter.Allow] or [ConcurrencyLimiter.TryAcquire].
	Wait bool
	// Status is the status of a refusal: 0 means 429 Too Many Requests
	// (the caller exhausted its budget); use 503 Service Unavailable for a
	// service-wide guard (the service is saturated). Only 429 and 503 are
	// accepted.
	Status int
	// RateLimitHeader sends this policy's item in the RateLimit header
	// field (draft-ietf-httpapi-ratelimit-headers-11, see [NewMiddleware])
	// of every response it decided: r, the permits available after the
	// decision, and on a refusal that knows it t, the seconds until a
	// retry could pass (the Retry-After sent). The default, false, sends
	// nothing of the policy: its state stays private.
	RateLimitHeader bool
	// PublishQuota sends this policy's item in the RateLimit-Policy
	// header field of every response it decided: q, the limiter's
	// capacity (a composite's smallest), and w, the seconds an empty
	// limiter takes to be full again (rounded up), or for a concurrency
	// limiter qu="concurrent-requests". It is independent of
	// RateLimitHeader. The default, false, publishes neither quota nor
	// window. A partition key (the draft's pk) is never sent.
	PublishQuota bool
	// ProblemType, ProblemTitle and ProblemDetail replace the type (a URI
	// reference), title and detail of the problem body of this policy's
	// refusals answered with Status (its budget is spent); each "" keeps
	// the default (for 429, type
	// "https://www.rfc-editor.org/rfc/rfc6585#section-4", title "Too Many
	// Requests", detail "The request exceeds the current rate limit.").
	// A denied identity's 403 and a request costing more than the
	// capacity keep theirs. A ProblemType that is not a URI reference,
	// or any of the three set together with Reject, is refused by
	// NewMiddleware.
	ProblemType, ProblemTitle, ProblemDetail string
	// Reject, when set, writes every refusal of this policy (a spent
	// budget, a denied identity, a request costing more than the
	// capacity) instead of the problem body: the middleware has set
	// Cache-Control: no-store, Retry-After (when refusal.RetryAfter > 0)
	// and the policy's RateLimit fields on w.Header(), and Reject writes
	// the status and body (it may change those headers). It is called on
	// the request's goroutine, concurrently for concurrent requests.
	// Limiter failures (503) and a negative Permits (500) are not
	// refusals: they keep the default answers.
	Reject func(w http.ResponseWriter, r *http.Request, refusal Refusal)
	// Shadow runs the policy without enforcing it (a dry run, to try a
	// new limit on real traffic): it decides and consumes as usual, but a
	// request it refuses (its budget spent, a denied identity, a cost
	// above the capacity, a limiter failure, a negative Permits) goes on
	// to the next policy and the handler as if granted; a concurrency
	// policy's handler then runs without a lease. What it would have
	// refused is counted in coordination.rate_limit.policy.refused with
	// mode=shadow and the reason, and logged at info: the first refusal
	// of each reason, then at most one line a minute per policy and
	// reason with the number of refusals since the last line (the
	// policy's name and the reason, never a partition, key or address).
	// Its RateLimit item never says refused: r (the permits available
	// after the decision) without t; its RateLimit-Policy item is
	// unchanged. Its grants are given back like an enforced policy's
	// when a later enforced policy refuses the request. A shadow policy
	// never delays a request: with Wait it decides at once, as Allow does
	// (a request that would have waited is counted as a capacity
	// refusal). [WithShadow] makes every policy of a middleware a shadow.
	Shadow bool
	// Charge, when set, charges the request by its outcome: the policy
	// still takes Permits(r) (the estimate; 1 when Permits is nil) before
	// the handler, refusing as usual, and after the handler Charge returns
	// what the request really costs, given the response's status (200
	// when the handler wrote none) and reported, the last cost the handler
	// gave [ReportCost] (-1 when it gave none). Below the estimate, the
	// difference is given back (as far as the limiter still holds the
	// grant: a fixed window only within the grant's window, a token bucket
	// only before its next refill period, GCRA what has not come back by
	// itself); above it, the excess is charged, at most the limiter's
	// capacity more. Examples: count only failed logins (return 0 for a
	// 2xx), give everything back on a 5xx, charge the tokens or bytes the
	// handler reported. A negative return charges the estimate (the error
	// is logged, naming the policy). It is called on the request's
	// goroutine once the handler returned, also when the client went
	// away. Charge needs a consumptive limiter (Limiter or Partitioned)
	// and cannot be combined with Wait; NewMiddleware refuses both with an
	// error naming the policy.
	Charge func(r *http.Request, status int, reported int) int
}

// ReportCost records, for the request whose context ctx is (or derives
// from), the cost the handler measured (tokens, bytes, rows), in permits:
// each policy's [Policy.Charge] receives the last value reported (of
// nested middlewares with Charge policies, the innermost). It is safe for
// concurrent use; outside a request of a middleware with a Charge policy
// it does nothing.
//
// Errors: coordination.ErrInvalidArgument naming "ctx" (nil) or
// "permits" (negative), nothing recorded.
func ReportCost(ctx context.Context, permits int) error {
	if err := check.Context(ctx); err != nil {
		return err
	}
	if permits < 0 {
		return check.InvalidArgument("permits", "must be >= 0, got %d", permits)
	}
	if c, ok := ctx.Value(costKey{}).(*atomic.Int64); ok {
		c.Store(int64(permits))
	}
	return nil
}

// costKey is the context key of a request's reported cost (ReportCost).
type costKey struct{}

// Refusal describes a request a [Policy] refused, for its Reject function.
type Refusal struct {
	// Policy is the refusing policy's Name (its index when unnamed).
	Policy string
	// Status is the status the default answer has: the policy's Status
	// (429 or 503), or 403 Forbidden for a denied identity.
	Status int
	// RetryAfter is the Retry-After the middleware set, in whole seconds
	// (after [WithRetryAfter]'s spread and cap); 0 when it set none
	// (concurrency limiters, denied identities, a cost above the
	// capacity).
	RetryAfter time.Duration
	// Denied reports an identity on the limiter's deny list.
	Denied bool
	// TooLarge reports a request costing more permits than the policy
	// ever grants (see [Policy.Permits]): retrying it will not help.
	TooLarge bool
}

// MiddlewareOption configures [NewMiddleware].
type MiddlewareOption func(*middlewareConfig) error

type middlewareConfig struct {
	shadow     bool
	logger     *slog.Logger
	onError    func(*http.Request, error)
	spread     time.Duration
	retryCap   time.Duration
	randInt64N func(n int64) int64 // [0, n); tests replace it
}

// WithRetryAfter spreads and caps the Retry-After of refusals (and the
// RateLimit t parameter, which equals it): for a refusal whose limiter
// says a retry could pass after d, the middleware advertises
// min(d + j, ceiling) with j drawn uniformly from [0, spread] for each
// refusal, rounded up to whole seconds (at least 1; RFC 9110
// delay-seconds): Retry-After is in [ceil(min(d, ceiling)),
// ceil(min(d+spread, ceiling))] seconds. The spread keeps clients refused
// until one window boundary from all retrying at that instant; the ceiling
// bounds how long a client is told to stay away (a capped client that
// retries early is refused again, with a new Retry-After). spread 0 (the
// default) adds nothing, ceiling 0 (the default) caps nothing. A negative
// spread or ceiling is an error naming "spread" or "ceiling". Refusals without a
// Retry-After (concurrency limiters, denied identities, a cost above the
// capacity) are unchanged.
func WithRetryAfter(spread, ceiling time.Duration) MiddlewareOption {
	return func(c *middlewareConfig) error {
		if spread < 0 {
			return check.InvalidArgument("spread", "must not be negative, got %v", spread)
		}
		if ceiling < 0 {
			return check.InvalidArgument("ceiling", "must not be negative (0: no ceiling), got %v", ceiling)
		}
		c.spread, c.retryCap = spread, ceiling
		return nil
	}
}

// WithShadow runs every policy of the middleware in shadow mode (see
// [Policy.Shadow]): each decides, consumes, counts and logs as usual, and
// no request is ever refused or answered by the middleware, except that
// nothing is written when the request's context ends while waiting.
func WithShadow() MiddlewareOption {
	return func(c *middlewareConfig) error {
		c.shadow = true
		return nil
	}
}

// withRand replaces the middleware's random source of the Retry-After
// spread (tests).
func withRand(f func(n int64) int64) MiddlewareOption {
	return func(c *middlewareConfig) error {
		c.randInt64N = f
		return nil
	}
}

// WithLogger sets where the middleware reports limiters that could not
// decide (Redis unreachable, a refused AUTH, a NOPERM ...). The default is
// slog.Default(); pass slog.New(slog.DiscardHandler) to silence it.
//
// Each distinct failure (per policy, by its description) is logged once,
// then at most once a minute while it repeats, with the number of requests
// it affected meanwhile. A line carries the policy's name, the answer given
// (503, admitted by FailOpen, 503 by FailClosed) and the error as
// described by its class and the server's reply (NOAUTH, WRONGPASS,
// NOPERM, LOADING ...) or the failing network operation: never keys,
// partitions, addresses or passwords. A nil logger is an error naming
// "logger".
func WithLogger(l *slog.Logger) MiddlewareOption {
	return func(c *middlewareConfig) error {
		if l == nil {
			return check.InvalidArgument("logger", "must not be nil; use slog.New(slog.DiscardHandler) to silence the middleware")
		}
		c.logger = l
		return nil
	}
}

// WithErrorHandler sets a function the middleware calls, on the request's
// goroutine and before it answers, for every request whose limiter could
// not decide, including failures a [FailureMode] answered (the request
// then goes on under FailOpen; under FailClosed and ReturnError the
// middleware answers 503). err wraps the limiter's error
// with the policy's name; unlike the log lines it is the error as go-redis
// returned it, which may name the server's address. A request whose
// client went away (its context canceled) is not reported; one whose
// context's deadline passed while the limiter decided is (and answered
// 503). A nil fn is an
// error naming "handler".
func WithErrorHandler(fn func(r *http.Request, err error)) MiddlewareOption {
	return func(c *middlewareConfig) error {
		if fn == nil {
			return check.InvalidArgument("handler", "must not be nil")
		}
		c.onError = fn
		return nil
	}
}

// NewMiddleware returns net/http middleware that applies policies in order
// before calling the next handler. A request passes only when every policy
// grants it; the first refusal answers it and stops the chain. The layers
// are all or nothing: when a later policy refuses, the permits earlier
// policies took are given back (concurrency leases released, window,
// bucket and GCRA grants refunded, best effort: a refund gives back what
// the key provably still holds of the grant, nothing after its window
// rolled over, see the package documentation), and concurrency
// leases are released when the handler returns. Several limits on one key
// are better one [Composite] limiter: one atomic decision.
//
// For different policies per route, wrap each route's handler with its own
// middleware:
//
//	standard, err := ratelimit.NewMiddleware([]ratelimit.Policy{guard, perClient})
//	if err != nil {
//		return err
//	}
//	expensive, err := ratelimit.NewMiddleware([]ratelimit.Policy{guard, perClient, reports})
//	if err != nil {
//		return err
//	}
//	mux.Handle("GET /catalog", standard(catalog))
//	mux.Handle("POST /reports", expensive(createReport))
//
// A policy's state is private by default: responses carry no RateLimit
// header field unless a policy asks for it. A policy with
// [Policy.RateLimitHeader] adds its item to the RateLimit field, one with
// [Policy.PublishQuota] its item to the RateLimit-Policy field, of every
// response, allowed or refused, for which it decided, named by the
// policy's Name; the syntax is that of the IETF httpapi draft
// draft-ietf-httpapi-ratelimit-headers-11 ("RateLimit header fields for
// HTTP", unchanged in this respect since -08):
//
//	RateLimit-Policy: "client";q=20;w=2, "tenant";q=600;w=60
//	RateLimit: "client";r=0;t=1, "tenant";r=587
//
// q is the limiter's capacity (a composite's smallest), w the seconds an
// empty limiter takes to be full again (rounded up; absent for
// concurrency limiters, which say qu="concurrent-requests"), r the permits
// available after the decision, t the seconds until a refused request
// could pass (the Retry-After sent; only on a refusal that knows it). A
// partition key (the draft's pk) is never sent.
//
// A refused request gets the policy's status (429 or 503; 403 Forbidden
// for a denied identity, see [WithDenyList]), Cache-Control: no-store, a
// Retry-After header in whole seconds (rounded up, at least 1; spread and
// capped by [WithRetryAfter]) only when the refusal carries a RetryAfter,
// and an RFC 9457 application/problem+json body with type, title, status,
// detail (the policy's own with [Policy.ProblemType], ProblemTitle and
// ProblemDetail), instance (the request path), "violated-policies": the
// refusing policy's name, and "traceId" (the W3C trace id, 32 lower-case
// hex digits) when the request's context carries a valid OpenTelemetry
// span context (one an HTTP server instrumentation started); no
// partition, key or limit is disclosed. A policy's [Policy.Reject]
// writes its refusals instead of the problem body. A request that costs
// more permits than the policy's capacity is refused the same way, never
// with Retry-After, and its detail says that waiting will not help (see
// [Policy.Permits]). When a limiter fails (its failure mode is
// ReturnError or FailClosed), the answer is a 503 problem without
// Retry-After and without "violated-policies" (the store failed, the
// client broke no limit; [Policy.Reject] is not called), whatever the
// policy's Status. A limiter with [WithLocalFallback], or an in-process
// instance guard ([NewLocal], [NewLocalConcurrency]), keeps deciding
// while Redis is down instead. Every
// limiter failure is logged (see [WithLogger]) and given to the error
// handler ([WithErrorHandler]). When the request's context is canceled
// while the limiter decides (the client went away), nothing is written.
// When its deadline passes instead (a server-side timeout, such as a
// context.WithTimeout around the middleware: the client still waits), the
// request is answered (an [http.TimeoutHandler] around it answers its own
// 503 first, and discards what the middleware writes after): a [Policy.Wait] that
// found the limit full until then is refused as above (without
// Retry-After), and a limiter that could not decide in time gets the 503
// of a failing limiter in every failure mode (a deadline is not an outage
// FailOpen admits: see [FailureMode]).
//
// A shadow policy ([Policy.Shadow], [WithShadow]) decides and consumes
// but never answers: what it would have refused is counted and logged,
// and the request goes on.
//
// Errors: coordination.ErrInvalidArgument naming "policies" when none is
// given; naming the policy ("policy NAME" or "policy INDEX") when it sets
// none or more than one of Limiter, Concurrency, Partitioned and
// PartitionedConcurrency, lacks Partition, sets Wait
// on a limiter that never queues (WithQueue(0, ...)), has another Status,
// a Name that is not printable ASCII, a ProblemType that is not a URI
// reference, or Reject together with ProblemType, ProblemTitle or
// ProblemDetail; naming an invalid option.
func NewMiddleware(policies []Policy, opts ...MiddlewareOption) (func(http.Handler) http.Handler, error) {
	cfg := middlewareConfig{}
	if err := check.Apply(&cfg, opts); err != nil {
		return nil, err
	}
	if cfg.logger == nil {
		cfg.logger = slog.Default()
	}
	if cfg.randInt64N == nil {
		cfg.randInt64N = rand.Int64N
	}
	if len(policies) == 0 {
		return nil, check.InvalidArgument("policies", "give at least one policy")
	}
	ps := make([]policy, len(policies))
	for i, p := range policies {
		name := p.Name
		if name == "" {
			name = strconv.Itoa(i)
		}
		arg := "policy " + name
		for _, c := range name {
			if c < 0x20 || c > 0x7e {
				return nil, check.InvalidArgument("policy "+strconv.Itoa(i), "the name must be printable ASCII (it is sent in headers)")
			}
		}
		if n := btoi(p.Limiter != nil) + btoi(p.Concurrency != nil && p.Concurrency.l != nil) + btoi(p.Partitioned != nil) + btoi(p.PartitionedConcurrency != nil); n != 1 {
			return nil, check.InvalidArgument(arg, "set exactly one of Limiter, Concurrency, Partitioned and PartitionedConcurrency")
		}
		if (p.Partitioned != nil || p.PartitionedConcurrency != nil) && p.Partition == nil {
			return nil, check.InvalidArgument(arg, "Partitioned and PartitionedConcurrency need a Partition function")
		}
		if l := p.limiter(); l != nil && p.Wait && l.opts.queueLimit == 0 {
			return nil, check.InvalidArgument(arg, "Wait on a limiter that never queues (WithQueue(0, ...)) is Allow; drop Wait or give the limiter a queue")
		}
		switch p.Status {
		case 0:
			p.Status = http.StatusTooManyRequests
		case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		default:
			return nil, check.InvalidArgument(arg, "status must be 429 or 503, got %d", p.Status)
		}
		if p.Reject != nil && p.ProblemType+p.ProblemTitle+p.ProblemDetail != "" {
			return nil, check.InvalidArgument(arg, "set Reject or ProblemType, ProblemTitle and ProblemDetail, not both (Reject writes the whole answer)")
		}
		if _, err := url.Parse(p.ProblemType); err != nil {
			return nil, check.InvalidArgument(arg, "ProblemType %q is not a URI reference", p.ProblemType)
		}
		if p.Charge != nil && (p.Wait || p.Concurrency != nil || p.PartitionedConcurrency != nil) {
			return nil, check.InvalidArgument(arg, "Charge needs a consumptive limiter (Limiter or Partitioned) and no Wait")
		}
		p.Shadow = p.Shadow || cfg.shadow
		ps[i] = policy{Policy: p, name: name, quoted: strconv.Quote(name)}
		ps[i].initAttrs()
	}
	for i := len(ps) - 2; i >= 0; i-- {
		// A grant is refundable when a later enforced policy may refuse.
		ps[i].refundable = ps[i+1].refundable || !ps[i+1].Shadow
	}
	m := &middleware{policies: ps, cfg: cfg}
	for i := range ps {
		m.charges = m.charges || ps[i].Charge != nil
	}
	return m.wrap, nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// limiter returns the policy's one limiter (a concurrency limiter's
// inner one), or nil for a partitioned policy.
func (p *Policy) limiter() *Limiter {
	if p.Concurrency != nil {
		return p.Concurrency.l
	}
	return p.Limiter
}

// policy is a validated Policy with its name for errors and log lines (its
// Name, or its index).
type policy struct {
	Policy
	name   string
	quoted string // as a structured-field string
	items  atomic.Pointer[policyItem]
	// refundable: a later enforced policy may refuse the request, so a
	// grant of this one may be given back.
	refundable bool
	// attrs are the policy's instrument attributes: refused[mode][reason]
	// (mode 0 enforce, 1 shadow) and nearLimit.
	refused   [2][numReasons]metric.MeasurementOption
	nearLimit metric.MeasurementOption
	// shadowKeys are the shadow log's keys, by reason.
	shadowKeys [numReasons]string
}

type middleware struct {
	policies []policy
	charges  bool // a policy charges by outcome (Policy.Charge)
	cfg      middlewareConfig
	seen     engine.FailureLog // by policy and description
	shadows  engine.FailureLog // shadow refusals, by policy and reason
}

func (m *middleware) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var held, taken, charged []result
		var costs []int // the estimates of charged, by index
		defer func() { releaseAll(held) }()
		var hdr headers
		for i := range m.policies {
			p := &m.policies[i]
			n := 1
			if p.Permits != nil {
				n = p.Permits(r)
			}
			if n < 0 {
				err := check.InvalidArgument("permits", "the Permits function of policy %s returned %d", p.name, n)
				if p.Shadow {
					m.failed(r, p, err, "admitted (shadow)")
					continue
				}
				m.refund(r, taken)
				m.failed(r, p, err, "500 Internal Server Error")
				writeProblem(w, r, http.StatusInternalServerError, 0, nil, "")
				return
			}
			h := oversize
			if p.refundable || p.Charge != nil {
				h |= refundable // a later policy may refuse, or the outcome cost less: the grant may be given back
			}
			lease, err := p.allow(r, n, h)
			if err != nil {
				if errors.Is(r.Context().Err(), context.Canceled) {
					m.refund(r, taken)
					return // the client is gone: nobody reads an answer
				}
				// A deadline of the request's context (a server-side
				// timeout) is not a client gone: the client
				// waits for an answer. A Wait that Redis kept answering
				// "full" until then is the limit's refusal; anything else
				// is a limiter that could not decide in time.
				if p.Wait && !p.Shadow && errors.Is(err, coordination.ErrNotAcquired) {
					if lease.lim != nil {
						lease.lim.e.Count(policyRefused, p.refused[0][reasonOf(lease)])
					}
					m.refund(r, taken)
					hdr.set(w)
					m.refuse(w, r, p, n, lease, 0)
					return
				}
				if p.Shadow {
					m.failed(r, p, err, "admitted (shadow)")
					m.shadow(p, lease.lim, reasonUnavailable)
					continue
				}
				m.refund(r, taken)
				m.failed(r, p, err, "503 Service Unavailable")
				hdr.set(w)
				writeProblem(w, r, http.StatusServiceUnavailable, 0, nil, "")
				return
			}
			if lease.cause != nil {
				answer := "503 Service Unavailable (fail closed)"
				switch {
				case lease.failedOpen:
					answer = "admitted (fail open)"
				case p.Shadow:
					answer = "admitted (shadow; fail closed)"
				}
				m.failed(r, p, lease.cause, answer)
				if !lease.acquired && !p.Shadow {
					// Refused by FailClosed: the store failed, the client
					// broke no limit: unavailable, naming no policy.
					if lease.lim != nil {
						lease.lim.e.Count(policyRefused, p.refused[0][reasonOf(lease)])
					}
					m.refund(r, taken)
					hdr.set(w)
					writeProblem(w, r, http.StatusServiceUnavailable, 0, nil, "")
					return
				}
			}
			var retry int64 // the advertised retry, in seconds; 0: none
			if ra, ok := lease.RetryAfter(); ok && !p.Shadow {
				retry = m.retryAfter(ra)
			}
			hdr.add(p, lease, retry)
			if lease.near && lease.lim != nil {
				lease.lim.e.Count(policyNearLimit, p.nearLimit)
			}
			if !lease.acquired {
				if p.Shadow {
					m.shadow(p, lease.lim, reasonOf(lease))
					continue
				}
				if lease.lim != nil {
					lease.lim.e.Count(policyRefused, p.refused[0][reasonOf(lease)])
				}
				m.refund(r, taken)
				hdr.set(w)
				m.refuse(w, r, p, n, lease, retry)
				return
			}
			switch {
			case lease.held != nil:
				held = append(held, lease)
			case lease.mark >= 0 && lease.permits > 0:
				taken = append(taken, lease)
			}
			if p.Charge != nil && lease.acquired && lease.lim != nil && !lease.failedOpen {
				lease.policy = p
				charged = append(charged, lease)
				costs = append(costs, n)
			}
		}
		hdr.set(w)
		if !m.charges {
			next.ServeHTTP(w, r)
			return
		}
		sw := &statusWriter{ResponseWriter: w}
		reported := new(atomic.Int64)
		reported.Store(-1)
		r = r.WithContext(context.WithValue(r.Context(), costKey{}, reported))
		next.ServeHTTP(sw, r)
		m.charge(r, charged, costs, cmp.Or(sw.status, http.StatusOK), int(reported.Load()))
	})
}

// charge settles the grants of the policies with Charge by the outcome.
func (m *middleware) charge(r *http.Request, charged []result, costs []int, status, reported int) {
	if len(charged) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 5*time.Second)
	defer cancel()
	for i, le := range charged {
		p := le.policy
		actual := p.Charge(r, status, reported)
		if actual < 0 {
			m.failed(r, p, check.InvalidArgument("permits", "the Charge function of policy %s returned %d", p.name, actual), "charged the estimate")
			continue
		}
		if err := le.settleCost(ctx, costs[i], actual); err != nil {
			m.failed(r, p, err, "not charged by outcome")
		}
	}
}

// statusWriter records the status a handler wrote (for Policy.Charge).
type statusWriter struct {
	http.ResponseWriter
	status int
}

// WriteHeader records the status and writes it.
func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

// Write records an implicit 200 and writes b.
func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap returns the writer it wraps, for http.ResponseController.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// allow asks the policy's limiter: a refusal (Wait's included, and a
// request costing more than the capacity) is an unacquired lease.
func (p *policy) allow(r *http.Request, n int, h how) (result, error) {
	ctx := r.Context()
	f := func(l *Limiter) (result, error) {
		var (
			le  result
			err error
		)
		if p.Wait && !p.Shadow { // a shadow never delays a request
			le, _, err = l.wait(ctx, n, h)
		} else {
			le, err = l.allow(ctx, n, h)
		}
		if err != nil {
			le.lim = l // the engine that counts the failure
		}
		return le, err
	}
	if l := p.limiter(); l != nil {
		return f(l)
	}
	if p.PartitionedConcurrency != nil {
		return p.PartitionedConcurrency.p.with(p.Partition(r), func(c *ConcurrencyLimiter) (result, error) { return f(c.l) })
	}
	return p.Partitioned.p.with(p.Partition(r), f)
}

// retryAfter returns the Retry-After to advertise for a limiter's retry
// time d, in whole seconds: d plus the spread's random part, capped (see
// [WithRetryAfter]).
func (m *middleware) retryAfter(d time.Duration) int64 {
	if s := m.cfg.spread; s > 0 {
		j := time.Duration(m.cfg.randInt64N(int64(s) + 1)) // [0, spread]
		if d > math.MaxInt64-j {
			d = math.MaxInt64
		} else {
			d += j
		}
	}
	if c := m.cfg.retryCap; c > 0 && d > c {
		d = c
	}
	return RetryAfterSeconds(d)
}

// refuse answers a request p refused (lease not acquired), costing n
// permits, with Retry-After retry seconds (0: none): p's Reject, else a
// problem body.
func (m *middleware) refuse(w http.ResponseWriter, r *http.Request, p *policy, n int, lease result, retry int64) {
	status := p.Status
	if lease.denied {
		status = http.StatusForbidden
	}
	detail := ""
	if lease.tooLarge {
		m.tooLarge(p, n, lease, status)
		retry, detail = 0, costDetail
	}
	if p.Reject != nil {
		h := w.Header()
		h.Set("Cache-Control", "no-store")
		if retry > 0 {
			h.Set("Retry-After", strconv.FormatInt(retry, 10))
		}
		p.Reject(w, r, Refusal{Policy: p.name, Status: status, RetryAfter: time.Duration(retry) * time.Second,
			Denied: lease.denied, TooLarge: lease.tooLarge})
		return
	}
	writeProblem(w, r, status, retry, p, detail)
}

// refund gives back the window, bucket and GCRA grants of earlier
// policies when a later one refused the request (bounded by a few
// seconds, even when the request's context has ended).
func (m *middleware) refund(r *http.Request, taken []result) {
	if len(taken) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 5*time.Second)
	defer cancel()
	for _, l := range taken {
		if _, err := l.refund(ctx); err != nil {
			m.failed(r, &policy{name: "refund"}, err, "permits not given back")
		}
	}
}

// headers collects the items of the RateLimit-Policy and RateLimit
// fields of the policies that decided and publish them.
type headers struct {
	policy, limit fieldItems
}

// fieldItems are the items of one field: the first two in place (the
// value lives on the request's stack), any more in rest.
type fieldItems struct {
	n     int
	first [2]string
	rest  []string
}

func (f *fieldItems) add(item string) {
	if f.n < len(f.first) {
		f.first[f.n] = item
	} else {
		f.rest = append(f.rest, item)
	}
	f.n++
}

// join returns the items as one field value.
func (f *fieldItems) join() string {
	if f.n == 1 {
		return f.first[0]
	}
	var sb strings.Builder
	for i := range f.n {
		if i > 0 {
			sb.WriteString(", ")
		}
		if i < len(f.first) {
			sb.WriteString(f.first[i])
		} else {
			sb.WriteString(f.rest[i-len(f.first)])
		}
	}
	return sb.String()
}

// policyItem is a policy's RateLimit-Policy item for the settings it was
// built from (a limiter's settings change only by Update).
type policyItem struct {
	alg      byte
	capacity int
	window   time.Duration
	text     string
}

// item returns p's RateLimit-Policy item for the settings sp, built once
// per settings.
func (p *policy) item(sp *spec) string {
	if it := p.items.Load(); it != nil && it.alg == sp.alg && it.capacity == sp.capacity && it.window == sp.window {
		return it.text
	}
	it := &policyItem{alg: sp.alg, capacity: sp.capacity, window: sp.window}
	if sp.alg == algConc {
		it.text = fmt.Sprintf("%s;q=%d;qu=\"concurrent-requests\"", p.quoted, sp.capacity)
	} else {
		it.text = fmt.Sprintf("%s;q=%d;w=%d", p.quoted, sp.capacity, RetryAfterSeconds(sp.window))
	}
	p.items.Store(it)
	return it.text
}

// add collects the items p publishes (RateLimitHeader, PublishQuota) of
// its decision l, with t=retry seconds when retry > 0.
func (h *headers) add(p *policy, l result, retry int64) {
	if (!p.RateLimitHeader && !p.PublishQuota) || l.lim == nil || l.available < 0 {
		return // nothing asked for, or nothing known (a failure mode, a denied identity)
	}
	if p.PublishQuota {
		h.policy.add(p.item(l.lim.spec()))
	}
	if p.RateLimitHeader {
		var b [96]byte
		item := append(append(b[:0], p.quoted...), ";r="...)
		item = strconv.AppendInt(item, l.available, 10)
		if retry > 0 {
			item = strconv.AppendInt(append(item, ";t="...), retry, 10)
		}
		h.limit.add(string(item))
	}
}

// set writes the collected fields, under their canonical keys (no
// canonicalisation per request) and, when both are sent, with one slice
// for both values.
func (h *headers) set(w http.ResponseWriter) {
	if h.policy.n == 0 && h.limit.n == 0 {
		return
	}
	hd := w.Header()
	switch {
	case h.policy.n > 0 && h.limit.n > 0:
		v := []string{h.policy.join(), h.limit.join()}
		hd["Ratelimit-Policy"] = v[0:1:1]
		hd["Ratelimit"] = v[1:2:2]
	case h.policy.n > 0:
		hd["Ratelimit-Policy"] = []string{h.policy.join()}
	default:
		hd["Ratelimit"] = []string{h.limit.join()}
	}
}

// failed reports a limiter failure: to the error handler every time, to
// the log once per distinct failure and then at most once a minute.
func (m *middleware) failed(r *http.Request, p *policy, err error, answer string) {
	if m.cfg.onError != nil {
		m.cfg.onError(r, fmt.Errorf("ratelimit: policy %s: %w", p.name, err))
	}
	desc := engine.Describe(err)
	log, repeated := m.seen.Note(p.name+"\x00"+desc, time.Now())
	if !log {
		return
	}
	level := slog.LevelWarn
	if answer == "503 Service Unavailable" || answer == "500 Internal Server Error" {
		level = slog.LevelError
	}
	args := []any{"policy", p.name, "answer", answer, "error", desc}
	if repeated > 0 {
		args = append(args, "repeated", repeated)
	}
	m.cfg.logger.Log(context.Background(), level, "ratelimit: a limiter could not decide", args...)
}

// The reasons of the policy.refused instrument.
const (
	reasonCapacity = iota
	reasonDenyList
	reasonTooLarge
	reasonUnavailable
	numReasons
)

var reasonNames = [numReasons]string{"capacity", "deny_list", "too_large", "unavailable"}

// reasonOf returns the reason of a refusal.
func reasonOf(l result) int {
	switch {
	case l.denied:
		return reasonDenyList
	case l.tooLarge:
		return reasonTooLarge
	case l.cause != nil:
		return reasonUnavailable
	}
	return reasonCapacity
}

// initAttrs builds the policy's instrument attributes and shadow log keys.
func (p *policy) initAttrs() {
	pa := attribute.String("policy", p.name)
	for mode, mv := range [2]string{"enforce", "shadow"} {
		for r, rv := range reasonNames {
			p.refused[mode][r] = instrument.Attrs(pa, attribute.String("mode", mv), attribute.String("reason", rv))
		}
	}
	for r, rv := range reasonNames {
		p.shadowKeys[r] = p.name + "\x00" + rv
	}
	p.nearLimit = instrument.Attrs(pa)
}

// shadow records a request the shadow policy p would have refused for
// reason (lim: the limiter that decided or failed, nil when unknown): the
// policy.refused counter with mode=shadow, and a log line the first time,
// then at most once a minute per policy and reason, with the number of
// refusals not logged since.
func (m *middleware) shadow(p *policy, lim *Limiter, reason int) {
	if lim != nil {
		lim.e.Count(policyRefused, p.refused[1][reason])
	}
	log, repeated := m.shadows.Note(p.shadowKeys[reason], time.Now())
	if !log {
		return
	}
	args := []any{"policy", p.name, "reason", reasonNames[reason]}
	if repeated > 0 {
		args = append(args, "repeated", repeated)
	}
	m.cfg.logger.Info("ratelimit: a shadow policy would have refused a request; admitted", args...)
}

// costDetail is the problem detail of a request refused because it costs
// more permits than the policy's capacity.
const costDetail = "The request costs more permits than the rate-limit policy ever grants at once: it cannot be admitted, and retrying it will not help."

// tooLarge reports a request refused because its cost, permits, exceeds
// the capacity of the policy's limiter: at warn, once per policy and then
// at most once a minute (a client controls how often it happens), with
// the policy's name, the cost and the capacity, never a key or partition.
func (m *middleware) tooLarge(p *policy, permits int, lease result, status int) {
	log, repeated := m.seen.Note(p.name+"\x00cost over capacity", time.Now())
	if !log {
		return
	}
	args := []any{"policy", p.name, "permits", permits}
	if lease.lim != nil {
		args = append(args, "capacity", lease.lim.spec().capacity)
	}
	args = append(args, "answer", strconv.Itoa(status)+" "+http.StatusText(status))
	if repeated > 0 {
		args = append(args, "repeated", repeated)
	}
	m.cfg.logger.Warn("ratelimit: a request costs more permits than the policy's capacity; refused", args...)
}

// releaseAll releases concurrency leases after the handler, even when the
// request's context has ended, bounded by a few seconds.
func releaseAll(ls []result) {
	if len(ls) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, l := range ls {
		_ = l.release(ctx)
	}
}

// problem is an RFC 9457 problem details object; violated-policies is the
// extension member of the RateLimit header fields draft, traceId ours.
type problem struct {
	Type     string   `json:"type"`
	Title    string   `json:"title"`
	Status   int      `json:"status"`
	Detail   string   `json:"detail"`
	Instance string   `json:"instance,omitempty"`
	Violated []string `json:"violated-policies,omitempty"`
	TraceID  string   `json:"traceId,omitempty"`
}

// RetryAfterSeconds converts a RetryAfter ([Decision.RetryAfter],
// [WaitError]) into the value of an HTTP Retry-After header: whole
// seconds, rounded up, at least 1.
func RetryAfterSeconds(d time.Duration) int64 {
	s := int64(d / time.Second)
	if d%time.Second > 0 {
		s++ // rounded up without overflowing near the largest Duration
	}
	return max(s, 1)
}

// writeProblem answers r with a problem of status, naming p as the
// violated policy (when not nil, with its ProblemType, ProblemTitle and
// ProblemDetail when status is its Status and detail is ""), with
// Retry-After when retry > 0 (seconds), the status's detail unless detail
// is given, and the trace id of r's span context when it is valid.
func writeProblem(w http.ResponseWriter, r *http.Request, status int, retry int64, p *policy, detail string) {
	pb := problem{Status: status, Instance: r.URL.Path, TraceID: instrument.TraceID(r.Context())}
	switch status {
	case http.StatusTooManyRequests:
		pb.Type = "https://www.rfc-editor.org/rfc/rfc6585#section-4"
		pb.Title = "Too Many Requests"
		pb.Detail = "The request exceeds the current rate limit."
	case http.StatusForbidden:
		pb.Type = "https://www.rfc-editor.org/rfc/rfc9110#section-15.5.4"
		pb.Title = "Forbidden"
		pb.Detail = "The client is not allowed to make requests."
	case http.StatusInternalServerError:
		pb.Type = "https://www.rfc-editor.org/rfc/rfc9110#section-15.6.1"
		pb.Title = "Internal Server Error"
		pb.Detail = "The rate-limit policy could not be applied."
	default:
		pb.Type = "https://www.rfc-editor.org/rfc/rfc9110#section-15.6.4"
		pb.Title = "Service Unavailable"
		pb.Detail = "The service cannot accept more work right now."
	}
	if p != nil {
		pb.Violated = []string{p.name}
		if status == p.Status && detail == "" {
			pb.Type = cmp.Or(p.ProblemType, pb.Type)
			pb.Title = cmp.Or(p.ProblemTitle, pb.Title)
			pb.Detail = cmp.Or(p.ProblemDetail, pb.Detail)
		}
	}
	if detail != "" {
		pb.Detail = detail
	}
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	if retry > 0 {
		h.Set("Retry-After", strconv.FormatInt(retry, 10))
	}
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(pb)
}
