package ratelimit

import (
	"fmt"
	"math"
	"math/big"
	"reflect"
	"strings"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/localrate"
)

// maxSpanUs bounds every time span a limiter keeps in Redis (a window, the
// time to refill an empty bucket, a GCRA burst), in microseconds: 2^50 µs,
// about 35 years, so that server time plus any span stays an exact integer
// in a Lua number (below 2^53) for a few centuries.
const maxSpanUs = int64(1) << 50

// maxLimit bounds every permit count setting.
const maxLimit = math.MaxInt32

// Settings are the settings of one limiter: [FixedWindow], [SlidingWindow],
// [TokenBucket], [GCRA], [Throttle], [SlidingLog] or [Composite] (values
// or pointers). They are what [New] takes and what [Limiter.Update] changes.
// The interface is sealed: only this package's types implement it.
type Settings interface {
	// spec validates the settings into a limiter's decision parameters.
	spec() (*spec, error)
}

// FixedWindow configures a fixed-window limiter ([New]).
//
// By default a window starts at the first acquisition that finds no live
// window for the key, not at a clock-aligned boundary, and lasts Window; up
// to Limit permits are granted in it, then the count resets when it ends.
// With Align, windows start at fixed instants instead, the same for every
// key and replica: multiples of Window since the Unix epoch (AlignEpoch),
// or the start of each minute, hour, day or month in Location
// (AlignMinute ... AlignMonth; "100 a day, reset at midnight in
// Europe/Berlin"). A refusal's RetryAfter then runs to the next boundary.
// Requests on both sides of a window's end can use two windows' budgets
// close together.
//
// The decision still uses the server's clock. For a calendar period in a
// zone other than UTC, and for months, this process computes the period
// boundaries around its own clock (caching them for the current period)
// and sends them with each decision, and the script picks the window that
// holds the server's time: the two clocks may differ by up to one period.
// Beyond that a decision that would start a window fails with a Redis
// error reply starting with COORD_CLOCK, which the failure mode answers
// (the server is treated as unable to decide). Minutes, hours and days of
// UTC and AlignEpoch need no boundaries: they are arithmetic in the script.
//
// State: one string with the settings (alignment included), the window's
// end and the count; it expires when the window ends.
//
// [New] fails with coordination.ErrInvalidArgument naming "limit" (below
// 1), "window" (below 1 ms or not whole milliseconds; not zero with a
// calendar alignment), "align" (not one of the constants) or "location"
// (given without a calendar alignment; time.Local, whose name says no
// zone; a name other than 1 to 64 letters, digits and /_+-.; a zone that
// is not the tz database's zone of its name, such as a time.FixedZone:
// replicas and the local fallback load the zone by its name).
type FixedWindow struct {
	// Limit is the number of permits per window (1 or more).
	Limit int
	// Window is the window length: a whole number of milliseconds, at least
	// 1 ms (the window ends with the key's expiry, which Redis keeps in
	// milliseconds). Zero with a calendar alignment (AlignMinute ...
	// AlignMonth), whose period sets it.
	Window time.Duration
	// Align says where windows start: zero (at the first acquisition),
	// AlignEpoch, or a calendar period (AlignMinute, AlignHour, AlignDay,
	// AlignMonth). It is part of the stored settings: processes sharing
	// the key must agree on it (see [Limiter.Update]).
	Align Alignment
	// Location is the time zone of a calendar alignment (nil: UTC), named
	// in the stored settings by its name (time.LoadLocation's): every
	// process sharing the key must load the same zone. Daylight-saving
	// changes are followed (a day may last 23 or 25 hours).
	Location *time.Location
}

// SlidingWindow configures a segmented sliding-window limiter
// ([New]).
//
// Time is cut into Segments segments per Window, each
// ceil(Window/Segments) long (in whole microseconds), aligned to server
// time. Permits taken during a segment are returned one Window after that
// segment ends: never earlier than one Window after they were taken, and
// at most one segment later. So no span of one Window ever admits more than
// Limit permits. More segments return permits more promptly and make the
// state a little longer.
//
// State: one string with the settings, the total, the oldest and newest
// segment indexes and the permits of each segment in between (a few bytes
// more per live segment); it expires when the newest segment's permits are
// returned.
//
// [New] fails with coordination.ErrInvalidArgument naming "limit" (below
// 1), "window" (below 1 ms or not whole microseconds) or "segments" (outside
// 1..1024).
type SlidingWindow struct {
	// Limit is the number of permits per window (1 or more).
	Limit int
	// Window is the window length: a whole number of microseconds, at
	// least 1 ms.
	Window time.Duration
	// Segments is the number of segments per window, 1 to 1024.
	Segments int
}

// TokenBucket configures a token-bucket limiter ([New]).
//
// A bucket nobody has used is full (Limit tokens). Each whole Period since
// the bucket last dropped below full adds TokensPerPeriod tokens, up to
// Limit; a partial period is kept until it completes. Refill is computed
// from server time on each use; no timer runs anywhere. Over any long run
// it admits exactly TokensPerPeriod per Period (plus the initial Limit).
//
// State: one string with the settings, the token count and the start of
// the current refill period; it expires when the bucket would be full
// again.
//
// [New] fails with coordination.ErrInvalidArgument naming "limit" or
// "tokensPerPeriod" (below 1) or "period" (below 1 µs, not whole
// microseconds, or a refill span ceil(Limit/TokensPerPeriod) × Period
// beyond about 35 years).
type TokenBucket struct {
	// Limit is the bucket capacity and so the largest burst (1 or more).
	Limit int
	// TokensPerPeriod is the number of tokens added per whole period (1 or
	// more).
	TokensPerPeriod int
	// Period is the refill period: a whole number of microseconds, at
	// least 1 µs.
	Period time.Duration
}

// GCRA configures a Generic Cell Rate Algorithm limiter ([New]): the
// virtual-scheduling algorithm of the ATM Forum's Traffic Management
// Specification 4.0, as applied to rate limiting in Brandur Leach's "Rate
// Limiting, Cells, and GCRA" and in go-redis/redis_rate.
//
// Burst permits may be taken at once; after that one permit becomes
// available every Interval (a sustained rate of 1/Interval). Give the rate
// either as Interval or as Rate permits per Period: the interval is kept
// as an exact fraction of a microsecond, never rounded, so 3 per second
// admits exactly 3 per second over any long run, and rates up to
// 1,000,000 per second and beyond are exact. Only one timestamp (the
// theoretical arrival time) is stored. A batch of permits is granted whole
// or not at all; rejected requests and probes write nothing.
//
// State: one string with the settings and the theoretical arrival time;
// it expires when the full burst is available again.
//
// [New] fails with coordination.ErrInvalidArgument naming "burst" (below 1,
// or a burst span Burst × Interval beyond about 35 years), "interval"
// (negative, or neither or both of Interval and Rate/Period given), "rate"
// (below 1) or "period" (not positive).
type GCRA struct {
	// Burst is the total burst capacity, not an allowance on top of the
	// steady rate (1 or more).
	Burst int
	// Interval is the emission interval: the time one permit takes to come
	// back (at least 1 ns). Leave it zero when giving Rate and Period.
	Interval time.Duration
	// Rate permits per Period is the sustained rate, an alternative to
	// Interval (which is then Period/Rate, kept exact). Both or neither.
	Rate   int
	Period time.Duration
}

// Throttle configures a sliding-expiration throttle ([New]): "Limit
// attempts, then blocked until the caller stays quiet for Quiet", for
// logins, password resets and abuse.
//
// Attempts form runs: a run lasts while no two of its attempts are Quiet
// or more apart. A run grants up to Limit permits (attempts of one permit
// each, or larger requests); once they are used, every further attempt is
// refused and moves the end of the block to Quiet after itself, so a
// caller that keeps trying stays blocked however long it keeps at it. A
// refusal's RetryAfter is the time until the run ends (after a refused
// attempt: Quiet). When Quiet has passed since the run's latest attempt,
// the count starts over at zero. Granted attempts move the end too: Limit
// attempts spread over any length of time are refused after the Limit-th
// unless one gap between them lasted Quiet.
//
// Precisely, with server time: a call for 1 to Limit permits is an
// attempt, and so is a [Limiter.Penalize] and a settlement charging more
// than its estimate; a probe (Allow with 0 permits, [Limiter.Peek]) is
// not, nor is a give-back ([Limiter.Reward], a settlement below its
// estimate). Available is Limit less the permits counted in the run (0
// while blocked).
//
// Unlike the other algorithms, a refusal writes (the new end of the
// block), so refused requests are as costly on the server as grants. A
// [Reservation.Settle] below the estimate gives permits back only to the
// run that holds the reservation's grant (a run that ended holds nothing
// of it), the way to "count only failed logins": reserve 1, settle 0 on
// success. [Limiter.Update] keeps the count and the run's latest attempt;
// the new Limit and Quiet apply from the next decision on the key (until
// then the key expires as the old Quiet set it).
//
// It cannot be a [Composite]'s component (a composite writes nothing on a
// refusal, and this throttle must), and refuses [WithBatch] (permits
// granted from a local block would not move the end on the server).
//
// State: one string with the settings, the count and the run's first and
// latest attempt times (about 60 bytes); it expires when the run ends.
//
// [New] fails with coordination.ErrInvalidArgument naming "limit" (below
// 1) or "quiet" (below 1 ms, not whole milliseconds, or beyond about 35
// years).
type Throttle struct {
	// Limit is the number of permits one run of attempts grants (1 or
	// more).
	Limit int
	// Quiet is how long a caller must make no attempt for its count to
	// start over: a whole number of milliseconds, at least 1 ms.
	Quiet time.Duration
}

// maxLogLimit bounds a [SlidingLog]'s Limit: its state grows with it.
const maxLogLimit = 1000

// SlidingLog configures an exact sliding-log limiter ([New]) for small
// limits: "5 per 15 minutes" with no segment rounding.
//
// The key keeps the server time (in microseconds) of every grant still in
// the window, with its permits. A request is granted when the permits
// granted in the last Window, plus its own, are at most Limit; each
// permit leaves exactly Window after it was granted. A refusal's
// RetryAfter is the time until enough of the oldest counted grants leave
// (for one permit: until the oldest leaves). Unlike [SlidingWindow] no
// permit comes back late and none is counted twice, at the price of a
// state that grows with the grants in the window: so Limit is at most
// 1000.
//
// A charge out of band ([Limiter.Penalize], a settlement above its
// estimate) is one more entry at the server's time; a give-back
// ([Limiter.Reward], a settlement below its estimate) takes permits from
// the newest entries first; a reservation's give-back only from its own
// grant's entry while it is in the log (after it left the window,
// nothing: the permits came back by themselves). [Limiter.Update] keeps
// the entries: the new Limit and Window apply to them from the next
// decision on the key (until then the key expires as the old Window set
// it). [WithBatch] works as for
// the other algorithms. It is not (yet) a [Composite]'s component.
//
// State: one string with the settings, the total, the number of entries
// and the newest entry's time, then one entry per grant still in the
// window ("<µs>:<permits>", about 19 bytes), at most Limit entries: at
// most about 19 KB at Limit 1000. A decision reads only the entries that
// left the window and, to refuse, the oldest ones until enough would
// leave; a grant appends one; give-backs read them all. The server's
// cost still grows with the state (it reads and, on a grant, writes the
// whole string): on Redis 8, a refusal on a full log of 1000 entries
// takes about 5 times the instructions of a GCRA decision, a grant on a
// nearly empty log about 1.5 times. A charge that would leave more than Limit entries (only
// penalties and excess settlements can) merges the two oldest into the
// later one's time, so those permits leave later, never earlier. The key
// expires when the newest entry leaves the window.
//
// [New] fails with coordination.ErrInvalidArgument naming "limit"
// (outside 1..1000) or "window" (below 1 ms, not whole microseconds, or
// beyond about 35 years).
type SlidingLog struct {
	// Limit is the number of permits per window, 1 to 1000.
	Limit int
	// Window is the window length: a whole number of microseconds, at
	// least 1 ms.
	Window time.Duration
}

// Composite configures a composite limiter ([New]): several
// limits on one key, all of which must admit a request.
//
// Components are [FixedWindow], [SlidingWindow], [TokenBucket] and
// [GCRA] settings, 1 to 32 of them, in a fixed order: every process sharing
// the key must give the same algorithms in the same order (other numbers
// are migrated like a single limiter's, see [Limiter.Update]).
//
// Every decision is one script that evaluates each component
// with one server timestamp and consumes the permits from all of them only
// if all admit. A refusal's RetryAfter is the longest of the components'
// waits (for the whole batch); the decision's Available is the smallest.
//
// State: one hash with the signature (every component's settings) and one
// field per component's state; it expires when every component is back to
// empty.
//
// A key whose stored components differ in number or algorithms is refused
// with an error matching coordination.ErrConfigMismatch, consuming nothing;
// other numbers are migrated (or refused, with [WithStrictSettings]).
//
// [New] fails with coordination.ErrInvalidArgument naming "components"
// (none, more than 32, a nil, concurrency or composite component) or the
// invalid component setting ("limit", "window" ...).
type Composite struct {
	// Components are the limits, in order: FixedWindow, SlidingWindow,
	// TokenBucket or GCRA settings, 1 to 32.
	Components []Settings
}

// Algorithm letters of a spec.
const (
	algFixed   = 'f'
	algSliding = 's'
	algBucket  = 'b'
	algGCRA    = 'g'
	algComp    = 'c'
	algConc    = 'x'
	algThrot   = 't'
	algLog     = 'l'
)

// spec is a validated settings value: what a decision sends, and what the
// HTTP headers say. It is immutable.
type spec struct {
	settings Settings
	alg      byte
	capacity int
	// cfg is the settings as stored in Redis ("g:<burst>:<q>:<d>" ...);
	// for a composite, its signature; for concurrency, "x:<limit>:<ms>"
	// (not stored: it tells settings apart).
	cfg string
	// scripts are the algorithm's decision scripts, and tail their
	// ARGV[3:] (after op and permits): the cfg (a composite: its
	// signature, then each component's cfg).
	scripts scriptPair
	tail    []any
	// kinds are a composite's component algorithms, in order.
	kinds []byte
	// window is the time an empty limiter takes to become full again
	// (the RateLimit-Policy w parameter); 0 for concurrency.
	window time.Duration
	// Concurrency: the limit and the lease duration.
	leaseMs int64
	// cal computes the boundary argument of calendar windows in a zone
	// (sent after the tail); nil without.
	cal *calendar
}

func limitCheck(name string, n int) error {
	if n < 1 || n > maxLimit {
		return check.InvalidArgument(name, "must be between 1 and %d, got %d", maxLimit, n)
	}
	return nil
}

// micros returns d in whole microseconds, between least and maxSpanUs µs,
// or an error naming name.
func micros(name string, d, least time.Duration) (int64, error) {
	if d < least {
		return 0, check.InvalidArgument(name, "must be at least %v, got %v", least, d)
	}
	if d%time.Microsecond != 0 {
		return 0, check.InvalidArgument(name, "must be a whole number of microseconds (it is never rounded), got %v", d)
	}
	us := int64(d / time.Microsecond)
	if us > maxSpanUs {
		return 0, check.InvalidArgument(name, "must be at most %v, got %v", time.Duration(maxSpanUs)*time.Microsecond, d)
	}
	return us, nil
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// standalone sets the decision scripts and arguments of one limiter:
// its algorithm's scripts and its cfg. (Few arguments: a server refuses a
// command of more than 10 before authentication with a protocol error
// instead of NOAUTH.)
func standalone(s *spec, scripts scriptPair) *spec {
	s.scripts, s.tail = scripts, []any{s.cfg}
	return s
}

// args returns a decision script's arguments: op (d, s, a, or r followed
// by the refunded grant's age in µs), permits, then the tail.
func (s *spec) args(op string, permits int) []any {
	return s.argsTo(make([]any, 0, 2+len(s.tail)), op, permits)
}

// argsTo is args appended to dst (a buffer on the caller's stack on the
// hot path: no allocation when they fit).
func (s *spec) argsTo(dst []any, op any, permits int) []any {
	dst = append(append(dst, op, permits), s.tail...)
	if s.cal != nil {
		dst = append(dst, s.cal.value())
	}
	return dst
}

func (c FixedWindow) spec() (*spec, error) {
	if err := limitCheck("limit", c.Limit); err != nil {
		return nil, err
	}
	w, suffix, p, err := c.alignment()
	if err != nil {
		return nil, err
	}
	s := &spec{settings: c, alg: algFixed, capacity: c.Limit, cfg: fmt.Sprintf("f:%d:%d%s", c.Limit, w, suffix),
		window: time.Duration(w) * time.Millisecond}
	if p != nil {
		s.window = c.Align.nominal()
		s.cal = &calendar{periods: []*localrate.Period{p}, clock: time.Now}
	}
	return standalone(s, fixedScripts), nil
}

func (c SlidingWindow) spec() (*spec, error) {
	if err := limitCheck("limit", c.Limit); err != nil {
		return nil, err
	}
	w, err := micros("window", c.Window, time.Millisecond)
	if err != nil {
		return nil, err
	}
	if c.Segments < 1 || c.Segments > 1024 {
		return nil, check.InvalidArgument("segments", "must be between 1 and 1024, got %d", c.Segments)
	}
	s := &spec{settings: c, alg: algSliding, capacity: c.Limit, cfg: fmt.Sprintf("s:%d:%d:%d", c.Limit, w, c.Segments), window: c.Window}
	return standalone(s, slidingScripts), nil
}

func (c TokenBucket) spec() (*spec, error) {
	if err := limitCheck("limit", c.Limit); err != nil {
		return nil, err
	}
	if err := limitCheck("tokensPerPeriod", c.TokensPerPeriod); err != nil {
		return nil, err
	}
	p, err := micros("period", c.Period, time.Microsecond)
	if err != nil {
		return nil, err
	}
	// The time to refill an empty bucket, ceil(Limit/TokensPerPeriod)
	// periods, must stay an exact integer in the script.
	refills := ceilDiv(int64(c.Limit), int64(c.TokensPerPeriod))
	if p > maxSpanUs/refills {
		return nil, check.InvalidArgument("period", "the time to refill an empty bucket, ceil(limit / tokens per period) × period, must be at most %v", time.Duration(maxSpanUs)*time.Microsecond)
	}
	full := refills * p
	s := &spec{settings: c, alg: algBucket, capacity: c.Limit, cfg: fmt.Sprintf("b:%d:%d:%d", c.Limit, c.TokensPerPeriod, p),
		window: time.Duration(full) * time.Microsecond}
	return standalone(s, bucketScripts), nil
}

// interval returns the emission interval as a reduced fraction q/d of a
// microsecond.
func (c GCRA) interval() (q, d int64, err error) {
	var num, den int64 // nanoseconds per permit = num/den
	switch {
	case c.Interval != 0 && (c.Rate != 0 || c.Period != 0):
		return 0, 0, check.InvalidArgument("interval", "give Interval, or Rate and Period, not both")
	case c.Interval != 0:
		if c.Interval < 0 {
			return 0, 0, check.InvalidArgument("interval", "must be positive, got %v", c.Interval)
		}
		num, den = int64(c.Interval), 1
	case c.Rate == 0 && c.Period == 0:
		return 0, 0, check.InvalidArgument("interval", "give Interval, or Rate and Period")
	default:
		if err := limitCheck("rate", c.Rate); err != nil {
			return 0, 0, err
		}
		if c.Period <= 0 {
			return 0, 0, check.InvalidArgument("period", "must be positive, got %v", c.Period)
		}
		num, den = int64(c.Period), int64(c.Rate)
	}
	// µs per permit = num / (den * 1000), reduced.
	n, dd := big.NewInt(num), new(big.Int).Mul(big.NewInt(den), big.NewInt(1000))
	g := new(big.Int).GCD(nil, nil, n, dd)
	n.Div(n, g)
	dd.Div(dd, g)
	return n.Int64(), dd.Int64(), nil
}

func (c GCRA) spec() (*spec, error) {
	if err := limitCheck("burst", c.Burst); err != nil {
		return nil, err
	}
	q, d, err := c.interval()
	if err != nil {
		return nil, err
	}
	// burst × q (the span in 1/d µs) must be exact, and the span (burst ×
	// q/d µs) at most maxSpanUs.
	if q > maxSpanUs/int64(c.Burst) || ceilDiv(int64(c.Burst)*q, d) > maxSpanUs {
		return nil, check.InvalidArgument("burst", "burst × interval must be at most %v", time.Duration(maxSpanUs)*time.Microsecond)
	}
	span := int64(c.Burst) * q
	spanUs := ceilDiv(span, d)
	s := &spec{settings: c, alg: algGCRA, capacity: c.Burst, cfg: fmt.Sprintf("g:%d:%d:%d", c.Burst, q, d),
		window: time.Duration(spanUs) * time.Microsecond}
	return standalone(s, gcraScripts), nil
}

// millis returns d in whole milliseconds, between 1 ms and maxSpanUs µs,
// or an error naming name.
func millis(name string, d time.Duration) (int64, error) {
	if d%time.Millisecond != 0 {
		return 0, check.InvalidArgument(name, "must be a whole number of milliseconds (it is never rounded), got %v", d)
	}
	us, err := micros(name, d, time.Millisecond)
	return us / 1000, err
}

func (c Throttle) spec() (*spec, error) {
	if err := limitCheck("limit", c.Limit); err != nil {
		return nil, err
	}
	q, err := millis("quiet", c.Quiet)
	if err != nil {
		return nil, err
	}
	s := &spec{settings: c, alg: algThrot, capacity: c.Limit, cfg: fmt.Sprintf("t:%d:%d", c.Limit, q), window: c.Quiet}
	return standalone(s, throttleScripts), nil
}

func (c SlidingLog) spec() (*spec, error) {
	if c.Limit < 1 || c.Limit > maxLogLimit {
		return nil, check.InvalidArgument("limit", "must be between 1 and %d (a sliding log keeps every grant), got %d", maxLogLimit, c.Limit)
	}
	w, err := micros("window", c.Window, time.Millisecond)
	if err != nil {
		return nil, err
	}
	s := &spec{settings: c, alg: algLog, capacity: c.Limit, cfg: fmt.Sprintf("l:%d:%d", c.Limit, w), window: c.Window}
	return standalone(s, logScripts), nil
}

func (c Composite) spec() (*spec, error) {
	n := len(c.Components)
	if n < 1 || n > 32 {
		return nil, check.InvalidArgument("components", "give 1 to 32 components, got %d", n)
	}
	s := &spec{settings: Composite{Components: append([]Settings(nil), c.Components...)}, alg: algComp, capacity: maxLimit}
	cfgs := make([]string, n)
	for i, cs := range c.Components {
		if cs == nil {
			return nil, check.InvalidArgument("components", "component %d is nil", i)
		}
		if v := reflect.ValueOf(cs); v.Kind() == reflect.Pointer && v.IsNil() {
			return nil, check.InvalidArgument("components", "component %d is a nil %T", i, cs)
		}
		switch cs.(type) {
		case concurrency, Composite, *Composite, Throttle, *Throttle, SlidingLog, *SlidingLog:
			return nil, check.InvalidArgument("components", "component %d: a composite takes fixed windows, sliding windows, token buckets and GCRA", i)
		}
		one, err := cs.spec()
		if err != nil {
			return nil, fmt.Errorf("ratelimit: component %d: %w", i, err)
		}
		if one.alg != algFixed && one.alg != algSliding && one.alg != algBucket && one.alg != algGCRA {
			return nil, check.InvalidArgument("components", "component %d: a composite takes fixed windows, sliding windows, token buckets and GCRA", i)
		}
		cfgs[i] = one.cfg
		s.kinds = append(s.kinds, one.alg)
		if one.cal != nil {
			if s.cal == nil {
				s.cal = &calendar{comp: true, clock: time.Now}
			}
			s.cal.periods = append(s.cal.periods, one.cal.periods[0])
			s.cal.index = append(s.cal.index, i+1)
		}
		if one.capacity < s.capacity {
			s.capacity = one.capacity
			s.window = one.window
		}
	}
	s.cfg = strings.Join(cfgs, ";")
	s.scripts = compositeScripts
	s.tail = make([]any, 0, 1+n)
	s.tail = append(s.tail, s.cfg)
	for _, c := range cfgs {
		s.tail = append(s.tail, c)
	}
	return s, nil
}

// New returns a consumptive limiter on key with settings: a
// [FixedWindow], [SlidingWindow], [TokenBucket], [GCRA], [Throttle],
// [SlidingLog] or [Composite] (a value or a pointer). Each settings type documents its
// algorithm, its state in Redis and the fields it checks. New sends nothing to Redis. A
// concurrency limiter is [NewConcurrency]'s.
//
// Errors: coordination.ErrInvalidArgument naming the argument: "coord"
// (nil), "key" (empty, or longer than 1 KiB), "settings" (nil), the
// invalid field of the settings ("limit", "window", "burst" ...; see each
// settings type), "leaseDuration" ([WithLeaseDuration] is
// NewConcurrency's), or the invalid option's.
func New(coord *coordination.Coordinator, key string, settings Settings, opts ...Option) (*Limiter, error) {
	return newLimiter(coord, key, settings, opts)
}

// specOf validates settings, refusing nil (and a nil pointer) with an
// error naming name.
func specOf(name string, s Settings) (*spec, error) {
	if s == nil {
		return nil, check.InvalidArgument(name, "must not be nil")
	}
	if v := reflect.ValueOf(s); v.Kind() == reflect.Pointer && v.IsNil() {
		return nil, check.InvalidArgument(name, "must not be a nil %T", s)
	}
	return s.spec()
}
