package idempotency

import (
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/coordkit/coordination/internal/decode"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/instrument"
)

// The store's scripts, each next to its decoder, its lease kind and its
// instruments. The reply shapes are documented in the .lua files.
var (
	beginScript    = engine.NewScript("idempotency_begin", decodeBegin)
	completeScript = engine.NewScript("idempotency_complete", decode.Bool01)
	abandonScript  = engine.NewScript("idempotency_abandon", decode.Bool01)
	renewScript    = engine.NewScript("idempotency_renew", decode.Bool01)
	forgetScript   = engine.NewScript("idempotency_forget", decode.Bool01)
	failScript     = engine.NewScript("idempotency_fail", decode.Bool01)

	// claimKind is the lease kind of a pending claim kept alive while its
	// work runs ([Store.KeepAlive], Do and the middleware): a handle
	// adopted with engine.Adopt after Begin started the claim, renewed by
	// renewScript, ended with Forget once the claim is completed or
	// abandoned. Renewals are not admitted.
	claimKind = &engine.LeaseKind{
		Primitive: primitive,
		Refresh:   renewScript,
		Metrics:   claimMetrics,
	}

	// claimMetrics are the instruments of claims kept alive, recorded by
	// the engine's lease handle (it has no acquisition: no wait or
	// contention instrument).
	claimMetrics = instrument.Lease{
		Hold: instrument.New(instrument.Histogram, "coordination.idempotency.claim_hold_time", "s", "",
			"Time from starting an idempotency claim kept alive to completing, abandoning or losing it."),
		RenewalFailures: instrument.New(instrument.Counter, "coordination.idempotency.claim_renewal_failures", "{renewal}", "",
			"Keep-alive renewals of an idempotency claim that failed (lost, terminal or transient error)."),
		Lost: instrument.New(instrument.Counter, "coordination.idempotency.claims_lost", "{claim}", "",
			"Idempotency claims lost while their work ran: expired or taken over."),
	}
	beginsMetric = instrument.New(instrument.Counter, "coordination.idempotency.begins", "{begin}", "state",
		"Idempotency Begin answers (one per call, after any wait), by state (started, completed, in_progress, fingerprint_mismatch, failed).")
	completesMetric = instrument.New(instrument.Counter, "coordination.idempotency.completes", "{complete}", "result",
		"Idempotency Complete answers, by result (stored; not_owner: the caller holds no pending claim, it expired, was abandoned, taken over or completed).")
	tooLargeMetric = instrument.New(instrument.Counter, "coordination.idempotency.responses_too_large", "{response}", "",
		"Responses of the idempotency middleware larger than its bound (WithMaxResponseBytes): passed through, not stored, their claims abandoned, so a retry runs the handler again.")
	failsMetric = instrument.New(instrument.Counter, "coordination.idempotency.fails", "{fail}", "result",
		"Idempotency Fail answers, by result (failed: the claim now answers Failed; not_owner: the caller holds no pending claim, it expired, was abandoned, taken over or completed).")
	abandonsMetric = instrument.New(instrument.Counter, "coordination.idempotency.abandons", "{abandon}", "result",
		"Idempotency Abandon answers, by result (abandoned; not_owner: the caller holds no pending claim, it expired, was abandoned, taken over or completed).")
)

// beginReply is the decoded reply of idempotency_begin: the state, and the
// fields of that state only.
type beginReply struct {
	State     State
	Fence     int64         // Started: the claim's fencing token (>= 3)
	Owner     string        // Started: the claim's owner token
	Result    string        // Completed: the stored result bytes
	Remaining time.Duration // InProgress, Failed: the key's PTTL (>= 0)
}

// maxMillis is the largest millisecond count a time.Duration holds.
const maxMillis = int64(math.MaxInt64 / time.Millisecond)

// decodeBegin reads a pending claim as stored (started: its fence, at
// least 3, and owner), a completed claim as stored (completed: its result),
// an integer >= 0 (in progress: the claim's PTTL in ms), 'F' and the key's
// PTTL in ms (failed) or -2 (fingerprint mismatch); anything else (a claim of another shape, a PTTL beyond a
// time.Duration) is unrecognised. Claims are laid out as the package
// documentation says.
func decodeBegin(v any) (beginReply, bool) {
	switch r := v.(type) {
	case string:
		if ms, ok := strings.CutPrefix(r, "F"); ok {
			d, ok := pttl(ms)
			return beginReply{State: Failed, Remaining: d}, ok
		}
		if strings.HasPrefix(r, "C") {
			result, ok := completedResult(r)
			return beginReply{State: Completed, Result: result}, ok
		}
		fence, owner, ok := pendingClaim(r)
		return beginReply{State: Started, Fence: fence, Owner: owner}, ok
	case int64:
		switch {
		case r == -2:
			return beginReply{State: FingerprintMismatch}, true
		case r >= 0 && r <= maxMillis:
			return beginReply{State: InProgress, Remaining: time.Duration(r) * time.Millisecond}, true
		}
	}
	return beginReply{}, false
}

// pttl reads a remaining TTL in milliseconds as the begin script writes
// it after 'F': a decimal >= 0 that fits a time.Duration.
func pttl(ms string) (time.Duration, bool) {
	if ms != "0" && !positive(ms) {
		return 0, false
	}
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil || n > maxMillis {
		return 0, false
	}
	return time.Duration(n) * time.Millisecond, true
}

// pendingClaim returns the fence and the owner of a pending claim as
// stored: "P" <result ttl> ":" <fence> ":" <owner> ":" <fp>.
func pendingClaim(c string) (fence int64, owner string, ok bool) {
	rest, ok := strings.CutPrefix(c, "P")
	if !ok {
		return 0, "", false
	}
	ttl, rest, ok := strings.Cut(rest, ":")
	if !ok || !positive(ttl) {
		return 0, "", false
	}
	f, rest, ok := strings.Cut(rest, ":")
	if !ok || !positive(f) {
		return 0, "", false
	}
	owner, _, ok = strings.Cut(rest, ":")
	if !ok || owner == "" {
		return 0, "", false
	}
	fence, err := strconv.ParseInt(f, 10, 64)
	if err != nil || fence < 3 {
		return 0, "", false
	}
	return fence, owner, true
}

// completedResult returns the result bytes of a completed claim as
// stored: "C" <completion id> ":" <fp> <result>, fp "-:" or the
// fingerprint's length in decimal, ":" and its bytes.
func completedResult(c string) (string, bool) {
	id, rest, ok := strings.Cut(c[1:], ":")
	if !ok || id == "" {
		return "", false
	}
	if r, ok := strings.CutPrefix(rest, "-:"); ok {
		return r, true
	}
	n, rest, ok := strings.Cut(rest, ":")
	if !ok || !(n == "0" || positive(n)) || len(n) > 10 {
		return "", false
	}
	size, err := strconv.Atoi(n)
	if err != nil || size > len(rest) {
		return "", false
	}
	return rest[size:], true
}

// positive reports whether s is a positive decimal without leading zeros.
func positive(s string) bool {
	if s == "" || s[0] == '0' {
		return false
	}
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
