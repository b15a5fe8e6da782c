package ratelimit

import (
	"strconv"
	"time"

	"github.com/coordkit/coordination/internal/decode"
	"github.com/coordkit/coordination/internal/engine"
)

// The rate limiters' scripts, each next to its decoder. The reply shapes
// are documented in the .lua files. Each is immutable and safe for
// concurrent use.
var (
	// The decision scripts, one per algorithm and one for a composite
	// (ratelimit_fixed, _sliding, _bucket, _gcra, _throttle, _log,
	// _composite), each under
	// both its decoders: a decision (operations d, s), and a settlement or
	// a refund (a, r). A spec holds its algorithm's pair. Every one is
	// consumptive (a second run consumes again), so each is sent at most
	// once ([engine.Script.Once]): never re-sent once it may have run, a
	// lost reply an ambiguous error for the caller.
	fixedScripts     = decisionScripts("ratelimit_fixed")
	slidingScripts   = decisionScripts("ratelimit_sliding")
	bucketScripts    = decisionScripts("ratelimit_bucket")
	gcraScripts      = decisionScripts("ratelimit_gcra")
	compositeScripts = decisionScripts("ratelimit_composite")
	throttleScripts  = decisionScripts("ratelimit_throttle")
	logScripts       = decisionScripts("ratelimit_log")

	// The concurrency limiter's lease scripts follow the lease argument
	// convention (ARGV = member, TTL ms, limit, permits, strict for the
	// acquire; member, TTL ms for the renewal; member for the verify and
	// the release).
	concAcquireScript = engine.NewScript("ratelimit_conc_acquire", decodeConcGrant)
	concRenewScript   = engine.NewScript("ratelimit_conc_renew", decode.Bool01)
	concVerifyScript  = engine.NewScript("ratelimit_conc_verify", decode.Bool01)
	concReleaseScript = engine.NewScript("ratelimit_conc_release", decode.SoleRelease)
	// concAbandonScript is the cleanup of an ambiguous acquisition
	// (engine.LeaseKind.Abandon: member, tombstone TTL ms): it returns the
	// member's permits if held and leaves a tombstone that the acquire
	// script refuses to that member alone.
	concAbandonScript = engine.NewScript("ratelimit_conc_abandon", decode.SoleRelease)

	// resetScript deletes a limiter's key after checking it holds the
	// caller's algorithm (idempotent: a re-send finds it gone).
	resetScript = engine.NewScript("ratelimit_reset", decode.Bool01)

	// denyReadScript reads and denyWriteScript changes a deny list's
	// membership. A write is sent at most once (Once): re-sent after a
	// lost reply, it could run after another client's later write and
	// undo it (a Remove re-sent after a DenyFor lifted the new denial: the
	// deny list's checked histories caught it); a lost reply is an
	// ambiguous error instead.
	denyReadScript  = engine.NewScript("ratelimit_deny_read", decodeDenial)
	denyWriteScript = engine.NewScript("ratelimit_deny_write", decode.Bool01).Once()
)

// scriptPair is a decision script under its two decoders.
type scriptPair struct {
	decide *engine.Script[decideReply]
	adjust *engine.Script[adjustReply]
}

func decisionScripts(name string) scriptPair {
	return scriptPair{engine.NewScript(name, decodeDecision).Once(), engine.NewScript(name, decodeAdjust).Once()}
}

// decideReply is the decoded reply of a decision (operations d, s of a
// [scriptPair]'s script).
type decideReply struct {
	Acquired bool
	// Available is the number of permits free after the decision.
	Available int64
	// RetryIn is, for a refusal, the server-computed time until the same
	// request would be admitted (at least 1 µs); HasRetry is false when
	// there is none (an acquired request, or more permits than the limit).
	RetryIn  time.Duration
	HasRetry bool
	// Mark is a refundable grant's mark (operations D, S), -1 otherwise.
	Mark int64
}

// decodeDecision reads a grant (an integer >= 0: the permits available;
// a refundable one {available >= 0, 0, mark >= 0}) or a refusal
// ({available >= 0, wait_us >= 1 or -1}).
func decodeDecision(v any) (decideReply, bool) {
	if n, ok := v.(int64); ok {
		return decideReply{Acquired: true, Available: n, Mark: -1}, n >= 0
	}
	a, ok := v.([]any)
	if ok && len(a) == 3 {
		n, ok1 := a[0].(int64)
		z, ok2 := a[1].(int64)
		m, ok3 := a[2].(int64)
		return decideReply{Acquired: true, Available: n, Mark: m}, ok1 && ok2 && ok3 && n >= 0 && z == 0 && m >= 0
	}
	if !ok || len(a) != 2 {
		return decideReply{}, false
	}
	n, ok1 := a[0].(int64)
	w, ok2 := a[1].(int64)
	if !ok1 || !ok2 || n < 0 || (w < 1 && w != -1) {
		return decideReply{}, false
	}
	d := decideReply{Available: n, Mark: -1}
	if w > 0 {
		d.RetryIn, d.HasRetry = decode.Scaled(w, time.Microsecond), true
	}
	return d, true
}

// adjustReply is the decoded reply of a settlement or a refund
// (operations a, r): whether it was applied (a refund that, by its
// algorithm's rule, finds none of its grant's permits still held gives
// nothing back: not applied), and the permits available after it.
type adjustReply struct {
	Applied   bool
	Available int64
}

// decodeAdjust reads {applied 0 or 1, available >= 0}.
func decodeAdjust(v any) (adjustReply, bool) {
	a, ok := decode.Ints(v, 2)
	if !ok || a[1] < 0 || (a[0] != 0 && a[0] != 1) {
		return adjustReply{}, false
	}
	return adjustReply{Applied: a[0] == 1, Available: a[1]}, true
}

// decisionInts reads {acquired, available, retry_ms}: acquired is 0 or 1,
// available >= 0, retry_ms -1 when acquired and >= -1 otherwise.
func decisionInts(v any) ([]int64, bool) {
	a, ok := decode.Ints(v, 3)
	if !ok || a[1] < 0 {
		return nil, false
	}
	switch a[0] {
	case 1:
		return a, a[2] == -1
	case 0:
		return a, a[2] >= -1
	}
	return nil, false
}

// decodeConcGrant reads the concurrency acquire's {acquired, available,
// next_ms} as a Grant: RetryIn is the time until the earliest live lease
// expires (0 when none), Value the permits available as a decimal string
// (read it with [concAvailable]).
func decodeConcGrant(v any) (decode.Grant, bool) {
	a, ok := decisionInts(v)
	if !ok {
		return decode.Grant{}, false
	}
	return decode.Grant{Acquired: a[0] == 1, RetryIn: decode.RetryIn(a[2]), Value: strconv.FormatInt(a[1], 10)}, true
}

// concAvailable returns the permits available that a concurrency grant
// carries, or -1 for a grant that did not come from [concAcquireScript].
func concAvailable(g decode.Grant) int64 {
	n, err := strconv.ParseInt(g.Value, 10, 64)
	if err != nil || n < 0 {
		return -1
	}
	return n
}

// decodeDenial reads a deny-list read: 0 (not denied), -1 (denied without
// end) or the milliseconds left of a denial (>= 1).
func decodeDenial(v any) (int64, bool) {
	n, ok := v.(int64)
	return n, ok && n >= -1
}
