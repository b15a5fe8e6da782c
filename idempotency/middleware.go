package idempotency

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/engine"
)

// HeaderKey is the request header field that carries the idempotency key
// (IETF draft "The Idempotency-Key HTTP Header Field").
const HeaderKey = "Idempotency-Key"

// HeaderReplayed is the response header field set to "true" on a replayed
// response, so a client can tell a replay from the original.
const HeaderReplayed = "Idempotent-Replayed"

// DefaultReplayHeaders returns the response header fields stored and
// replayed by default: those that describe the body or point at what the
// request created (Content-Type, Content-Encoding, Content-Language,
// Content-Location, Location, ETag, Last-Modified). Each call returns a new
// slice.
func DefaultReplayHeaders() []string {
	return []string{
		"Content-Type", "Content-Encoding", "Content-Language", "Content-Location",
		"Location", "ETag", "Last-Modified",
	}
}

// DefaultReplayPolicy is the default answer to "is this response stored and
// replayed?" by status code. It stores responses whose status describes the
// request itself, so a retry would get the same answer: 2xx, 3xx and 4xx.
// It does not store 1xx, any 5xx (a server failure: the retry should run
// again), nor the 4xx that depend on timing or on the caller's credentials
// rather than on the request: 401, 403, 407, 408, 409, 423, 424, 425 and
// 429. A response that is not stored has its claim abandoned, so the next
// retry runs the handler again.
func DefaultReplayPolicy(status int) bool {
	switch status {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusProxyAuthRequired,
		http.StatusRequestTimeout, http.StatusConflict, http.StatusLocked,
		http.StatusFailedDependency, http.StatusTooEarly, http.StatusTooManyRequests:
		return false
	}
	return status >= 200 && status < 500
}

// DefaultFingerprint is the default request fingerprint: the hex SHA-256 of
// the method, the escaped path, the raw query and the body, each
// length-prefixed (so no two different requests share an encoding). Use it
// inside a custom fingerprint function to add fields, e.g. a header.
func DefaultFingerprint(r *http.Request, body []byte) string {
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	for _, part := range [][]byte{[]byte(r.Method), []byte(r.URL.EscapedPath()), []byte(r.URL.RawQuery), body} {
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(part)))])
		h.Write(part)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// MiddlewareOption configures [NewMiddleware]. An invalid option makes
// [NewMiddleware] fail with an error wrapping
// coordination.ErrInvalidArgument naming the setting.
type MiddlewareOption func(*middlewareConfig) error

type middlewareConfig struct {
	required         bool
	maxKeyLength     int
	claimTTL         time.Duration
	responseTTL      time.Duration
	maxRequestBytes  int64
	maxResponseBytes int
	replayHeaders    []string
	policy           func(status int) bool
	fingerprint      func(r *http.Request, body []byte) string
	namespace        func(r *http.Request) string
	retryAfter       time.Duration
	wait             time.Duration
	onError          func(r *http.Request, stage string, err error)
	noKeepAlive      bool
}

// WithKeyRequired makes a request without an Idempotency-Key field an error
// (400, [ProblemKeyMissing]). Otherwise such a request goes straight to the
// handler, without idempotency. The default is false.
func WithKeyRequired(required bool) MiddlewareOption {
	return func(c *middlewareConfig) error {
		c.required = required
		return nil
	}
}

// WithMaxKeyLength bounds the length of a key, in bytes after unquoting; a
// longer key is answered 400 ([ProblemKeyInvalid]). n must be between 1
// and 512 (the setting is named "maxKeyLength"), so that the store key
// ([StoreKey]: the key with its namespace) stays within the library's
// 1 KiB bound on keys for namespaces up to about 490 bytes. The default is
// 255.
func WithMaxKeyLength(n int) MiddlewareOption {
	return func(c *middlewareConfig) error {
		if n < 1 || n > maxKeyLength {
			return check.InvalidArgument("maxKeyLength", "must be between 1 and %d, got %d", maxKeyLength, n)
		}
		c.maxKeyLength = n
		return nil
	}
}

// maxKeyLength is the largest WithMaxKeyLength: half of the library's
// bound on keys, the rest for the store key's namespace.
const maxKeyLength = check.MaxKeyBytes / 2

// WithClaimTTL sets how long a request's claim stays pending: while it
// does, retries get 409 (or wait, see [WithWaitForOriginal]); after it, a
// retry runs the handler again. Choose it longer than the handler's worst
// case (bound the handler, e.g. with http.TimeoutHandler or the server's
// WriteTimeout), or a slow original and a retry can both run. At least
// 1 ms ("claimTTL"). The default is 1 minute.
func WithClaimTTL(d time.Duration) MiddlewareOption {
	return check.AtLeast("claimTTL", d, time.Millisecond, func(c *middlewareConfig) { c.claimTTL = d })
}

// WithClaimKeepAlive says whether the middleware keeps a request's claim
// alive while the handler runs (the default, true): it renews the claim
// every claim TTL/3 ([Store.KeepAlive]), and cancels the request's context
// (cause matching coordination.ErrLost) when the claim is lost. With
// false the claim lasts the claim TTL ([WithClaimTTL]) whatever the
// handler does.
func WithClaimKeepAlive(keepAlive bool) MiddlewareOption {
	return func(c *middlewareConfig) error {
		c.noKeepAlive = !keepAlive
		return nil
	}
}

// WithResponseTTL sets how long a stored response is replayed: the key
// expires d after the response was stored, and a request with the same key
// after that runs the handler again. Publish it to clients (the IETF draft
// asks servers to document their key expiry). At least 1 ms ("response
// ttl"). The default is 24 hours.
func WithResponseTTL(d time.Duration) MiddlewareOption {
	return check.AtLeast("responseTTL", d, time.Millisecond, func(c *middlewareConfig) { c.responseTTL = d })
}

// WithMaxRequestBytes bounds the request body read to compute the
// fingerprint (the body is buffered in memory and then handed to the
// handler unchanged). A larger body is answered 413
// ([ProblemRequestTooLarge]) without running the handler. n must not be
// negative ("maxRequestBytes"). The default is 1 MiB.
func WithMaxRequestBytes(n int64) MiddlewareOption {
	return check.AtLeast("maxRequestBytes", n, 0, func(c *middlewareConfig) { c.maxRequestBytes = n })
}

// WithMaxResponseBytes bounds the response body stored for replay. A
// larger response is passed through to the client unchanged but is not
// stored: its claim is abandoned, so a retry runs the handler again; each
// is counted in coordination.idempotency.responses_too_large and logged at
// warn (once, then at most once a minute with the number of repeats). Use it
// on routes whose large responses are safe to compute twice, or raise the
// bound. n must be between 0 and 16 MiB - 64 KiB (coordination's bound on
// a stored value, check.MaxValueBytes, less room for the status and the
// replayed header fields; the setting is named "maxResponseBytes"). The
// default is 1 MiB.
func WithMaxResponseBytes(n int) MiddlewareOption {
	return func(c *middlewareConfig) error {
		if n < 0 || n > check.MaxValueBytes-responseOverhead {
			return check.InvalidArgument("maxResponseBytes", "must be between 0 and %d, got %d", check.MaxValueBytes-responseOverhead, n)
		}
		c.maxResponseBytes = n
		return nil
	}
}

// responseOverhead is room for a stored response's status and replayed
// header fields within coordination's bound on a stored value.
const responseOverhead = 64 << 10

// WithReplayHeaders replaces the response header fields stored and replayed
// (names are canonicalised, e.g. "location" becomes "Location"). Other
// fields are not replayed; Content-Length is always set to the stored
// body's length. The default is the list of [DefaultReplayHeaders].
func WithReplayHeaders(names ...string) MiddlewareOption {
	return func(c *middlewareConfig) error {
		c.replayHeaders = make([]string, len(names))
		for i, n := range names {
			c.replayHeaders[i] = http.CanonicalHeaderKey(n)
		}
		return nil
	}
}

// WithReplayPolicy sets which responses, by status code, are stored and
// replayed. A response the policy rejects is passed through and its claim
// abandoned, so the next retry runs the handler again. policy must not be
// nil ("replayPolicy") and must be safe for concurrent use. The default
// is [DefaultReplayPolicy].
func WithReplayPolicy(policy func(status int) bool) MiddlewareOption {
	return func(c *middlewareConfig) error {
		if policy == nil {
			return check.InvalidArgument("replayPolicy", "must not be nil")
		}
		c.policy = policy
		return nil
	}
}

// WithRequestFingerprint sets how a request is fingerprinted. body is the
// whole request body (at most the [WithMaxRequestBytes] bound); r.Body
// yields the same bytes and is reset for the handler afterwards. fn must
// not be nil ("requestFingerprint") and must be safe for concurrent use.
// A retry whose fingerprint differs from the original's gets 422
// ([ProblemKeyReused]). The default is [DefaultFingerprint]: method, path,
// query and body.
func WithRequestFingerprint(fn func(r *http.Request, body []byte) string) MiddlewareOption {
	return func(c *middlewareConfig) error {
		if fn == nil {
			return check.InvalidArgument("requestFingerprint", "must not be nil")
		}
		c.fingerprint = fn
		return nil
	}
}

// WithNamespace scopes keys: fn returns the namespace of a request (the
// tenant, account or authenticated user), and equal keys in different
// namespaces are independent. Without it every client shares one key
// space, and a client that learns another's key and request can be served
// that client's stored response. fn runs after authentication (put the
// middleware inside it), must not be nil ("namespace") and must be safe
// for concurrent use. The default is one namespace for everyone.
func WithNamespace(fn func(r *http.Request) string) MiddlewareOption {
	return func(c *middlewareConfig) error {
		if fn == nil {
			return check.InvalidArgument("namespace", "must not be nil")
		}
		c.namespace = fn
		return nil
	}
}

// WithRetryAfter sets the Retry-After advertised with 409 while the original
// is in progress: d rounded up to whole seconds, at most the claim's
// remaining TTL, and at least 1 second. d must be positive ("retry
// after"). The default is 1 second.
func WithRetryAfter(d time.Duration) MiddlewareOption {
	return func(c *middlewareConfig) error {
		if d <= 0 {
			return check.InvalidArgument("retryAfter", "must be positive, got %v", d)
		}
		c.retryAfter = d
		return nil
	}
}

// WithWaitForOriginal makes a retry that arrives while the original is in
// progress wait up to d for it (see [WithWait]; no polling) and then
// replay its response, instead of answering 409 at once. If the original
// is abandoned meanwhile, the retry runs the handler itself; if d passes
// first, it gets 409. The wait also ends when the request's context does.
// d must not be negative ("waitForOriginal"). The default is 0: answer
// 409 at once.
func WithWaitForOriginal(d time.Duration) MiddlewareOption {
	return check.AtLeast("waitForOriginal", d, 0, func(c *middlewareConfig) { c.wait = d })
}

// WithErrorHandler sets a function called with every error of the store
// that the middleware cannot hand to anyone else: a request refused with
// 503 because its key could not be checked (stage "begin") or its stored
// response could not be read (stage "replay"), and a response that could
// not be stored (stage "complete") or a claim that could not be abandoned
// (stage "abandon") after the handler ran. It is not called when the
// client went away before its key was checked. fn gets the error as
// returned (unlike the log line, it may name the server's address); it runs
// on the request's goroutine, must not write to the response and must be
// safe for concurrent use. It must not be nil ("errorHandler").
//
// Whether or not it is set, the middleware logs each distinct failure on
// the coordinator's logger (coordination.WithLogger) at level WARN with
// the error's description (class and the server's error reply, e.g.
// "terminal: server replied NOAUTH Authentication required."), never with
// keys, tokens, addresses or passwords; a failure that repeats is logged
// again at most once a minute, with the number of repeats in between.
func WithErrorHandler(fn func(r *http.Request, stage string, err error)) MiddlewareOption {
	return func(c *middlewareConfig) error {
		if fn == nil {
			return check.InvalidArgument("errorHandler", "must not be nil")
		}
		c.onError = fn
		return nil
	}
}

// NewMiddleware returns net/http middleware that makes handlers idempotent
// with the Idempotency-Key request header (IETF draft "The
// Idempotency-Key HTTP Header Field"): the first request with a key runs
// the handler and its response (status, chosen headers, body) is stored; a
// retry with the same key and the same request replays it, marked with
// [HeaderReplayed].
//
// For a request with a key, in order:
//
//   - a malformed key (more than one field: two field lines, or one
//     line holding a list such as "a, b", a comma outside a quoted
//     string, which is what a proxy makes of two lines, both answered
//     alike; an empty value, a bad quoted string, characters outside
//     printable ASCII) or one longer than [WithMaxKeyLength]: 400,
//     [ProblemKeyInvalid];
//   - a body over [WithMaxRequestBytes]: 413, [ProblemRequestTooLarge];
//   - the key was used for a different request (fingerprint, see
//     [WithRequestFingerprint]): 422, [ProblemKeyReused];
//   - the original is still running: 409 with Retry-After,
//     [ProblemInProgress] (or a wait, see [WithWaitForOriginal]);
//   - the original failed (its handler panicked): 409 with Retry-After,
//     [ProblemOutcomeUnknown];
//   - the original's response was stored: it is replayed;
//   - the store cannot be reached, or holds an unreadable record: 503
//     with Retry-After, [ProblemUnavailable]; the handler does not run;
//   - otherwise the handler runs, once. Its response goes to the client
//     as it is written and is stored if [WithReplayPolicy] accepts its
//     status and it fits [WithMaxResponseBytes]; otherwise the claim is
//     abandoned and a retry runs the handler again. If the handler panics,
//     the claim is marked failed ([Store.Fail]) for the rest of its TTL
//     ([WithClaimTTL]), as [Store.Do] marks it: the handler may have had
//     effects before it panicked, and net/http clients re-send requests
//     that carry an Idempotency-Key after a broken connection (which is
//     what a panic leaves them), so retries get 409 with
//     [ProblemOutcomeUnknown] and a Retry-After until the record
//     expires. The panic goes on.
//
// A request without a key gets 400 ([ProblemKeyMissing]) when keys are
// required ([WithKeyRequired]) and goes straight to the handler otherwise.
// Error bodies are RFC 9457 problem details (application/problem+json)
// with Cache-Control: no-store, and with "traceId" (the W3C trace id, 32
// lower-case hex digits) when the request's context carries a valid
// OpenTelemetry span context (one an HTTP server instrumentation started):
// a client quoting it finds the request's trace.
//
// A key may be sent as a Structured Field string, Idempotency-Key:
// "8e03978e-...", as the draft specifies, or bare, as many APIs accept;
// both name the same key. A bare key cannot hold a comma (the value would
// be a list); a quoted one can. The handler sees the request body unchanged.
//
// A stored response is replayed to a request with the same namespace
// ([WithNamespace]), key and fingerprint until [WithResponseTTL] passes.
// The guarantees are those of [Store]: a handler runs once while the claim
// or response is kept in Redis, and a handler that outlives
// [WithClaimTTL] may overlap a retry.
//
// Claims and responses are stored in store. NewMiddleware sends nothing
// to Redis. For different settings per route, wrap each route's handler
// with its own middleware:
//
//	payments, err := idempotency.NewMiddleware(store, idempotency.WithKeyRequired(true))
//	if err != nil {
//		return err
//	}
//	mux.Handle("POST /payments", payments(createPayment))
//
// The returned function and the handlers it returns are safe for
// concurrent use by multiple goroutines.
//
// It returns an error wrapping coordination.ErrInvalidArgument naming
// "store" when store is nil, or naming the setting of an invalid option
// (see each option).
func NewMiddleware(store *Store, opts ...MiddlewareOption) (func(http.Handler) http.Handler, error) {
	e, err := store.engine()
	if err != nil {
		return nil, err
	}
	c := middlewareConfig{
		maxKeyLength:     255,
		claimTTL:         time.Minute,
		responseTTL:      24 * time.Hour,
		maxRequestBytes:  1 << 20,
		maxResponseBytes: 1 << 20,
		replayHeaders:    DefaultReplayHeaders(),
		policy:           DefaultReplayPolicy,
		fingerprint:      DefaultFingerprint,
		namespace:        func(*http.Request) string { return "" },
		retryAfter:       time.Second,
	}
	if err := check.Apply(&c, opts); err != nil {
		return nil, err
	}
	m := &middleware{store: store, e: e, cfg: c, log: errorLog{logger: e.Logger()}}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { m.serve(w, r, next) })
	}, nil
}

// middleware is the state shared by the handlers one NewMiddleware call
// wraps.
type middleware struct {
	store *Store
	e     *engine.Engine
	cfg   middlewareConfig
	log   errorLog
}

// StoreKey returns the key under which the middleware keeps the claim for
// an idempotency key in a namespace (before the coordinator's prefix):
// "idempotency:" + the namespace's length + ":" + namespace + ":" + key, so
// that no two namespace/key pairs share a store key. Use it to inspect or
// delete a claim with [Store] or coordctl.
func StoreKey(namespace, key string) string {
	return "idempotency:" + strconv.Itoa(len(namespace)) + ":" + namespace + ":" + key
}

func (m *middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	key, present, bad := parseKey(r.Header.Values(HeaderKey), m.cfg.maxKeyLength)
	if bad != "" {
		writeProblem(w, r, problem{Type: ProblemKeyInvalid, Title: "Invalid Idempotency-Key",
			Status: http.StatusBadRequest, Detail: bad}, 0)
		return
	}
	if !present {
		if m.cfg.required {
			writeProblem(w, r, problem{Type: ProblemKeyMissing, Title: "Idempotency-Key required",
				Status: http.StatusBadRequest,
				Detail: "This operation requires an Idempotency-Key header field with a unique key per request."}, 0)
			return
		}
		next.ServeHTTP(w, r)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, min(m.cfg.maxRequestBytes, math.MaxInt64-1)+1))
	if err != nil {
		writeProblem(w, r, problem{Type: "about:blank", Title: http.StatusText(http.StatusBadRequest),
			Status: http.StatusBadRequest, Detail: "The request body could not be read."}, 0)
		return
	}
	if int64(len(body)) > m.cfg.maxRequestBytes {
		writeProblem(w, r, problem{Type: ProblemRequestTooLarge, Title: "Request body too large",
			Status: http.StatusRequestEntityTooLarge,
			Detail: fmt.Sprintf("An idempotent request body may hold at most %d bytes.", m.cfg.maxRequestBytes)}, 0)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	fp := m.cfg.fingerprint(r, body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	skey := StoreKey(m.cfg.namespace(r), key)

	claim, err := m.store.Begin(r.Context(), skey, m.cfg.claimTTL,
		WithFingerprint(fp), WithResultTTL(m.cfg.responseTTL), WithWait(m.cfg.wait))
	if err != nil {
		m.unavailable(w, r, "begin", err)
		return
	}
	switch claim.State {
	case Completed:
		resp, err := decodeResponse(claim.Result)
		if err != nil {
			m.unavailable(w, r, "replay", err)
			return
		}
		replay(w, r, resp)
	case InProgress:
		writeProblem(w, r, problem{Type: ProblemInProgress, Title: "Request in progress",
			Status: http.StatusConflict,
			Detail: "A request with this Idempotency-Key is still being processed; retry later."},
			min(m.cfg.retryAfter, max(claim.Remaining, time.Millisecond)))
	case Failed:
		writeProblem(w, r, problem{Type: ProblemOutcomeUnknown, Title: "Outcome of the original request unknown",
			Status: http.StatusConflict,
			Detail: "The request with this Idempotency-Key failed while being processed and may have had effects; it is not run again until Retry-After has passed."},
			max(claim.Remaining, time.Millisecond))
	case FingerprintMismatch:
		writeProblem(w, r, problem{Type: ProblemKeyReused, Title: "Idempotency-Key reused",
			Status: http.StatusUnprocessableEntity,
			Detail: "This Idempotency-Key was used for a different request; use a new key for a new request."}, 0)
	default:
		m.run(w, r, next, skey, claim)
	}
}

type fenceKey struct{}

// FenceFrom returns the fencing token ([Claim.Fence]) of the claim the
// middleware runs the request under, or [Store.Do] its fn: the handler
// passes it to its writes to resources that check tokens. ok is false
// outside them (a request without an Idempotency-Key, or another
// context).
func FenceFrom(ctx context.Context) (fence int64, ok bool) {
	if ctx == nil {
		return 0, false
	}
	fence, ok = ctx.Value(fenceKey{}).(int64)
	return fence, ok
}

// run executes the handler under the caller's claim and then stores its
// response or abandons the claim.
func (m *middleware) run(w http.ResponseWriter, r *http.Request, next http.Handler, skey string, claim Claim) {
	owner := claim.Owner
	rec := newRecorder(w, m.cfg.replayHeaders, m.cfg.maxResponseBytes)
	work := context.WithValue(r.Context(), fenceKey{}, claim.Fence)
	if !m.cfg.noKeepAlive {
		kctx, stop, err := m.store.KeepAlive(work, skey, claim, m.cfg.claimTTL)
		if err != nil {
			m.failed(r, "keep-alive", err, "idempotency: claim not kept alive; it lasts the claim TTL")
		} else {
			// After the settle below, or on a panic after the claim is
			// marked failed (see NewMiddleware).
			defer stop()
			work = kctx
		}
	}
	// If the handler panics, the claim is marked failed (see NewMiddleware)
	// before the panic goes on.
	settled := false
	defer func() {
		if !settled {
			m.store.failAfter(r.Context(), skey, owner)
		}
	}()
	next.ServeHTTP(rec, r.WithContext(work))
	settled = true
	// The claim is settled even when the client has gone away: the handler
	// ran, and a retry must see its response.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), settleTimeout)
	defer cancel()
	resp := rec.response()
	if rec.over {
		m.e.Count(tooLargeMetric, nil)
		if log, repeats := m.log.seen.Note("response too large", time.Now()); log {
			args := []any{"max_response_bytes", m.cfg.maxResponseBytes, "status", resp.Status}
			if repeats > 0 {
				args = append(args, "repeats", repeats)
			}
			m.log.logger.Warn("idempotency: response larger than the bound not stored; its claim is abandoned, so a retry runs the handler again (raise WithMaxResponseBytes)", args...)
		}
	}
	if rec.over || !m.cfg.policy(resp.Status) {
		m.abandon(ctx, r, skey, owner)
		return
	}
	ok, err := m.store.Complete(ctx, skey, owner, resp.Encode())
	switch {
	case err != nil:
		m.failed(r, "complete", err,
			"idempotency: response not stored; a retry may run the handler again once the claim expires")
	case !ok:
		m.e.Logger().Warn("idempotency: claim no longer held (expired or forgotten) before the response was stored; a retry may run the handler again (raise the claim TTL if it expired)")
	}
}

func (m *middleware) abandon(ctx context.Context, r *http.Request, skey, owner string) {
	if _, err := m.store.Abandon(ctx, skey, owner); err != nil {
		m.failed(r, "abandon", err, "idempotency: claim not abandoned; retries get 409 until it expires")
	}
}

func (m *middleware) unavailable(w http.ResponseWriter, r *http.Request, stage string, err error) {
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		// The client went away; nobody reads the answer.
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	m.failed(r, stage, err, "idempotency: store unavailable; request refused")
	writeProblem(w, r, problem{Type: ProblemUnavailable, Title: "Idempotency store unavailable",
		Status: http.StatusServiceUnavailable,
		Detail: "The request was not processed because its Idempotency-Key could not be checked; retry later."},
		m.cfg.retryAfter)
}

// failed reports a store failure: to the error handler, and to the log
// (de-duplicated, described without keys, tokens, addresses or passwords).
func (m *middleware) failed(r *http.Request, stage string, err error, msg string) {
	if m.cfg.onError != nil {
		m.cfg.onError(r, stage, err)
	}
	m.log.warn(msg, stage, err)
}

// replay writes a stored response, marked as a replay.
func replay(w http.ResponseWriter, r *http.Request, s storedResponse) {
	h := w.Header()
	for n, v := range s.Header {
		h[n] = v
	}
	h.Set(HeaderReplayed, "true")
	noBody := s.Status == http.StatusNoContent || s.Status == http.StatusNotModified || s.Status < 200
	if !noBody {
		h.Set("Content-Length", strconv.Itoa(len(s.Body)))
	}
	w.WriteHeader(s.Status)
	if !noBody && r.Method != http.MethodHead {
		_, _ = w.Write(s.Body)
	}
}

// parseKey reads the Idempotency-Key field values. It returns the key and
// whether one was sent, or a non-empty reason when the field is malformed.
// The value may be an RFC 8941 sf-string ("...", with \" and \\ escapes) or
// a bare string; both must be printable ASCII. A value that is a list (a
// comma outside a quoted string: "a, b", which is what a proxy makes of
// two field lines, RFC 9110 section 5.3) is refused as two lines are.
func parseKey(values []string, maxLen int) (key string, present bool, bad string) {
	const several = "Send exactly one Idempotency-Key header field."
	switch len(values) {
	case 0:
		return "", false, ""
	case 1:
	default:
		return "", true, several
	}
	v := trimOWS(values[0])
	if isList(v) {
		return "", true, several
	}
	if v == "" {
		return "", true, "The Idempotency-Key header field is empty."
	}
	if v[0] == '"' {
		var b []byte
		closed := false
		for i := 1; i < len(v); i++ {
			c := v[i]
			switch {
			case closed:
				return "", true, "The quoted Idempotency-Key has characters after its closing quote."
			case c == '\\':
				i++
				if i == len(v) || (v[i] != '"' && v[i] != '\\') {
					return "", true, `The quoted Idempotency-Key has a backslash not followed by " or \.`
				}
				b = append(b, v[i])
			case c == '"':
				closed = true
			case c < 0x20 || c > 0x7e:
				return "", true, "The Idempotency-Key must be printable ASCII."
			default:
				b = append(b, c)
			}
		}
		if !closed {
			return "", true, "The quoted Idempotency-Key lacks its closing quote."
		}
		if len(b) == 0 {
			return "", true, "The Idempotency-Key header field is empty."
		}
		v = string(b)
	} else {
		for i := 0; i < len(v); i++ {
			if v[i] < 0x20 || v[i] > 0x7e {
				return "", true, "The Idempotency-Key must be printable ASCII."
			}
		}
	}
	if len(v) > maxLen {
		return "", true, fmt.Sprintf("The Idempotency-Key is %d bytes long; at most %d are allowed.", len(v), maxLen)
	}
	return v, true, ""
}

// isList reports whether the field value v is a list of several members:
// it holds a comma outside a quoted string. As in an HTTP list (RFC 9110
// section 5.6.1), a member that begins with a double quote (after blanks)
// is a quoted string up to its closing quote, in which a backslash escapes
// the next character; a double quote elsewhere quotes nothing. An unclosed
// quoted string hides the rest (parseKey refuses it for that).
func isList(v string) bool {
	start := true // at the start of a member, blanks skipped
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == ',':
			return true
		case start && (c == ' ' || c == '\t'):
		case start && c == '"':
			start = false
			for i++; i < len(v) && v[i] != '"'; i++ {
				if v[i] == '\\' {
					i++
				}
			}
		default:
			start = false
		}
	}
	return false
}

func trimOWS(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}
