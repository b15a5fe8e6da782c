package ratelimit

import (
	"context"
	"fmt"
	"math/big"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// The timed tests run on real servers too, where b.Advance sleeps and the
// server's clock runs on: while the test sleeps, and while a loaded
// machine stalls the test, the limiter or the server for a second or more,
// at any point. A test that sleeps and then expects an exact count assumes
// that no stall happened. Instead, the timed tests read the server's clock
// (TIME) around each step: a stamp brackets the instant of a step, and a
// model of the algorithm (bucketModel, gcraModel, slidingModel) turns the
// stamps into the fewest and the most permits a step may grant, whether a
// request may be granted or refused, and the shortest and the longest
// RetryAfter it may answer. A stall changes the expected range, not the
// verdict.
//
// On miniredis the clock moves only with b.Advance: every stamp is one
// instant, the bounds meet, and the tests check both that the model gives
// the scenario's documented number and that the limiter does. On a real
// server the bounds meet too when nothing stalled (a step takes
// milliseconds, and the scenarios keep their instants well away from the
// algorithms' boundaries): a clean run checks the exact numbers there as
// well, and a wider range is logged.

// stamp is a server instant known only to lie in [lo, hi]: the server's
// clock read before and after the step that set it.
type stamp struct{ lo, hi time.Time }

func (s stamp) width() time.Duration { return s.hi.Sub(s.lo) }

// end is the instant hi alone.
func (s stamp) end() stamp { return stamp{s.hi, s.hi} }

func (s stamp) String() string {
	return fmt.Sprintf("[%s, %s]", s.lo.Format("15:04:05.000000"), s.hi.Format("15:04:05.000000"))
}

// hull is the smallest stamp holding a and b.
func hull(a, b stamp) stamp {
	lo, hi := a.lo, a.hi
	if b.lo.Before(lo) {
		lo = b.lo
	}
	if b.hi.After(hi) {
		hi = b.hi
	}
	return stamp{lo, hi}
}

// sclock reads a backend's server clock.
type sclock struct {
	t   testing.TB
	b   *testharness.Backend
	raw redis.UniversalClient
}

func serverClock(t testing.TB, b *testharness.Backend) *sclock {
	return &sclock{t: t, b: b, raw: b.Raw(t)}
}

// now reads the server's clock in whole µs, as the scripts read it:
// miniredis' set time, or TIME (all the servers of a backend run on this
// machine's clock).
func (c *sclock) now() time.Time {
	c.t.Helper()
	if c.b.IsMini() {
		return c.b.Now().Truncate(time.Microsecond)
	}
	now, err := c.raw.Time(context.Background()).Result()
	if err != nil {
		c.t.Fatalf("TIME: %v", err)
	}
	return now
}

// around runs step and returns its stamp.
func (c *sclock) around(step func()) stamp {
	c.t.Helper()
	lo := c.now()
	step()
	return stamp{lo, c.now()}
}

// until waits until the server's clock is past t (on miniredis it moves
// the clock there).
func (c *sclock) until(t time.Time) {
	c.t.Helper()
	for now := c.now(); !now.After(t); now = c.now() {
		c.b.Advance(t.Sub(now) + time.Microsecond)
	}
}

// allow is acquire (Allow(permits)) with its stamp.
func (c *sclock) allow(l *tlim, permits int) (Lease, stamp) {
	c.t.Helper()
	var le Lease
	s := c.around(func() { le = acquire(c.t, l, permits) })
	return le, s
}

// burstRun is a burst of requests for one permit each, back to back: the
// permits granted, the stamps of its first grant (of its first request if
// granted, else the whole burst's) and of the whole burst, and whether its
// last request was refused.
type burstRun struct {
	offered, got int
	first, all   stamp
	lastRefused  bool
}

// burst offers n requests for one permit.
func (c *sclock) burst(l *tlim, n int) burstRun {
	c.t.Helper()
	r := burstRun{offered: n}
	lo := c.now()
	for i := range n {
		le := acquire(c.t, l, 1)
		if i == 0 && le.Acquired() {
			r.first = stamp{lo, c.now()}
		}
		if le.Acquired() {
			r.got++
		}
		r.lastRefused = !le.Acquired()
	}
	r.all = stamp{lo, c.now()}
	if r.first.lo.IsZero() {
		r.first = r.all
	}
	return r
}

// model is an algorithm's state followed through a test from the stamps
// of its steps.
type model interface {
	// burst returns the fewest and the most of n requests for one permit,
	// over y, that may be granted.
	burst(y stamp, n int) (lo, hi int)
	// one says whether a request for k permits at an instant of x may be
	// granted and may be refused, and bounds its RetryAfter when refused.
	one(x stamp, k int) (mayGrant, mayRefuse bool, raLo, raHi time.Duration)
	// took records a step over y (first: its first grant's stamp) that was
	// granted n permits in all, and whose last request, for need permits,
	// was refused (need 0: it was granted).
	took(y, first stamp, n, need int)
}

// checkBurst checks a burst's count against m and records it. want is the
// scenario's number: on miniredis the model's bounds must meet at it, and
// the count must be it.
func (c *sclock) checkBurst(m model, what string, r burstRun, want int) {
	c.t.Helper()
	lo, hi := m.burst(r.all, r.offered)
	wantCount(c.t, c.b, what, r.got, want, lo, hi, r.all)
	need := 0
	if r.lastRefused {
		need = 1
	}
	m.took(r.all, r.first, r.got, need)
}

// wantBurst offers n requests for one permit and checks the count.
func (c *sclock) wantBurst(l *tlim, m model, what string, n, want int) burstRun {
	c.t.Helper()
	r := c.burst(l, n)
	c.checkBurst(m, what, r, want)
	return r
}

// checkOne checks a request for k permits at x against m and records it.
// wantRA is the scenario's answer: a refusal retrying after exactly wantRA,
// or (0) a grant. On miniredis the model must say the same and the
// limiter must answer it; on real servers the outcome must be one the model
// allows, and a refusal's RetryAfter within its bounds.
func (c *sclock) checkOne(m model, what string, le Lease, x stamp, k int, wantRA time.Duration) {
	c.t.Helper()
	mayGrant, mayRefuse, raLo, raHi := m.one(x, k)
	if !c.b.IsMini() && (mayGrant != (wantRA == 0) || mayRefuse != (wantRA > 0)) {
		c.t.Logf("%s: granted=%v, where the server's clock allows a grant %v, a refusal %v (planned: refused %v): it moved more than planned",
			what, le.Acquired(), mayGrant, mayRefuse, wantRA > 0)
	}
	if c.b.IsMini() && (mayGrant != (wantRA == 0) || mayRefuse != (wantRA > 0) || (wantRA > 0 && (raLo != wantRA || raHi != wantRA))) {
		c.t.Fatalf("%s: the model says granted=%v refused=%v RetryAfter %v..%v on miniredis, want RetryAfter %v (0: granted): a test bug",
			what, mayGrant, mayRefuse, raLo, raHi, wantRA)
	}
	if le.Acquired() {
		if !mayGrant {
			c.t.Fatalf("%s at %v: granted; the server's clock says it must be refused (RetryAfter %v..%v)", what, x, raLo, raHi)
		}
		if ra, ok := le.RetryAfter(); ok {
			c.t.Fatalf("%s: granted with a RetryAfter (%v)", what, ra)
		}
		m.took(x, x, k, 0)
		return
	}
	if !mayRefuse {
		c.t.Fatalf("%s at %v: refused; the server's clock says it must be granted", what, x)
	}
	ra, ok := le.RetryAfter()
	switch {
	case !ok:
		c.t.Fatalf("%s: refused without a RetryAfter", what)
	case ra <= 0 || ra < raLo || ra > raHi:
		if raLo == raHi {
			c.t.Fatalf("%s: RetryAfter %v, want %v", what, ra, raLo)
		}
		c.t.Fatalf("%s at %v: RetryAfter %v, want %v..%v by the server's clock", what, x, ra, raLo, raHi)
	}
	m.took(x, x, 0, k)
}

// wantOne requests k permits and checks the answer (see checkOne).
func (c *sclock) wantOne(l *tlim, m model, what string, k int, wantRA time.Duration) Lease {
	c.t.Helper()
	le, x := c.allow(l, k)
	c.checkOne(m, what, le, x, k, wantRA)
	return le
}

// refusal requests k permits until one is refused (a stall may have
// brought more permits back than the scenario planned: they are checked
// against m and taken), and checks that the refusal left the key's state
// unchanged. On miniredis the first request must be the refusal, retrying
// after exactly wantRA.
func (c *sclock) refusal(l *tlim, m model, what string, k int, wantRA time.Duration, key string) Lease {
	c.t.Helper()
	for range 20 {
		before := dump(c.t, c.raw, key)
		le := c.wantOne(l, m, what, k, wantRA)
		if le.Acquired() {
			continue
		}
		if after := dump(c.t, c.raw, key); after != before {
			c.t.Fatalf("%s: a refusal changed the state:\n%s\n->\n%s", what, before, after)
		}
		return le
	}
	c.t.Fatalf("%s: still granted after 20 requests", what)
	return Lease{}
}

// wantCount checks a count of a step over y (the permits it granted or
// found free) against the model's bounds [lo, hi]. On miniredis the
// bounds must meet at want (the scenario's number), and got must be want.
func wantCount(t testing.TB, b *testharness.Backend, what string, got, want, lo, hi int, y stamp) {
	t.Helper()
	if b.IsMini() && (lo != want || hi != want) {
		t.Fatalf("%s: the model allows %d..%d on miniredis, want exactly %d: a test bug", what, lo, hi, want)
	}
	switch {
	case lo > hi:
		t.Fatalf("%s: the model allows nothing (%d..%d): a test bug", what, lo, hi)
	case got < lo || got > hi:
		if lo == hi {
			t.Fatalf("%s: %d, want %d", what, got, lo)
		}
		t.Fatalf("%s over %v: %d, want %d..%d by the server's clock", what, y, got, lo, hi)
	case lo != hi || lo != want:
		t.Logf("%s: %d, within %d..%d (planned: %d): the server's clock moved more than planned", what, got, lo, hi, want)
	}
}

// floorDiv is a/b rounded down (b > 0), for a negative a too.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// divCeil is a/b rounded up (b > 0), for a negative a too.
func divCeil(a, b int64) int64 { return -floorDiv(-a, b) }

func clampInt(v, lo, hi int) int { return max(lo, min(v, hi)) }

// bucketModel follows a token bucket (TokenBucket): the tokens it holds,
// as a range, as of a stamp, and the phase of its refill periods, which
// start at phase + k × period (the script's r: the first grant from a full
// bucket sets it, refills move it by whole periods). A full bucket holds
// its limit whatever the time.
type bucketModel struct {
	lim, per int
	period   time.Duration
	tk       [2]int
	asOf     stamp
	phase    stamp // zero while the bucket has been full since it was made
}

func newBucketModel(s TokenBucket) *bucketModel {
	return &bucketModel{lim: s.Limit, per: s.TokensPerPeriod, period: s.Period, tk: [2]int{s.Limit, s.Limit}}
}

// periods returns the fewest and the most refill periods that can start
// after an instant of a and by an instant of b.
func (m *bucketModel) periods(a, b stamp) (lo, hi int) {
	if m.phase.lo.IsZero() {
		panic("bucketModel: a bucket that was never below its limit has no periods")
	}
	// The phase is the instant of a grant before a (or a period start
	// on its grid): no period can start after a and by the phase.
	p := int64(m.period)
	n := func(t, ph time.Time) int64 { return floorDiv(int64(t.Sub(ph)), p) }
	return int(max(0, n(b.lo, m.phase.hi)-n(a.hi, m.phase.lo))), int(max(0, n(b.hi, m.phase.lo)-max(0, n(a.lo, m.phase.hi))))
}

// tokens returns the fewest and the most tokens the bucket can hold at an
// instant of at, before the requests then.
func (m *bucketModel) tokens(at stamp) (lo, hi int) {
	if m.tk[0] >= m.lim {
		return m.lim, m.lim
	}
	plo, phi := m.periods(m.asOf, at)
	return min(m.lim, m.tk[0]+m.per*plo), min(m.lim, m.tk[1]+m.per*phi)
}

// refills bounds the tokens added while the requests of y run, beyond
// those there at its start: periods starting within y on the phase, and
// after a grant from a full bucket restarted them, on a phase inside y.
func (m *bucketModel) refills(y stamp) int {
	n := int(y.width() / m.period)
	if m.tk[0] < m.lim {
		_, p := m.periods(y, y)
		n += p
	}
	return m.per * n
}

func (m *bucketModel) burst(y stamp, n int) (lo, hi int) {
	tlo, thi := m.tokens(y)
	return min(n, tlo), min(n, thi+m.refills(y))
}

func (m *bucketModel) one(x stamp, k int) (mayGrant, mayRefuse bool, raLo, raHi time.Duration) {
	tlo, thi := m.tokens(x)
	mayGrant, mayRefuse = thi >= k, tlo < k
	if !mayRefuse {
		return mayGrant, mayRefuse, 0, 0
	}
	// Refused holding tk < k tokens: it needs ceil((k - tk) / per) more
	// periods, the first ending at the next period's start after x.
	p := m.period
	next := [2]time.Duration{time.Microsecond, p}
	dlo, dhi := int64(x.lo.Sub(m.phase.hi)), int64(x.hi.Sub(m.phase.lo))
	if n := floorDiv(dlo, int64(p)); n == floorDiv(dhi, int64(p)) {
		next = [2]time.Duration{p - time.Duration(dhi-n*int64(p)), p - time.Duration(dlo-n*int64(p))}
	}
	fewest := divCeil(int64(k-min(thi, k-1)), int64(m.per))
	most := divCeil(int64(k-tlo), int64(m.per))
	return mayGrant, mayRefuse, next[0] + time.Duration(fewest-1)*p, next[1] + time.Duration(most-1)*p
}

func (m *bucketModel) took(y, first stamp, n, need int) {
	tlo, thi := m.tokens(y)
	ref := m.refills(y)
	switch {
	case tlo >= m.lim && y.width() < m.period:
		// Full at the first request: its grant started the periods.
		m.phase = first
	case thi+ref < m.lim:
		// Never full: the periods go on.
	default:
		// A grant from a full bucket may have restarted them anywhere in y.
		m.phase = hull(m.gridBefore(y), y)
	}
	// Refills beyond the cap are lost, and the cap only lowers the count.
	lo, hi := max(0, tlo-n), max(0, min(m.lim, thi+ref-n))
	if need > 0 {
		hi = min(hi, need-1)
	}
	m.tk, m.asOf = [2]int{min(lo, hi), hi}, y
}

// gridBefore is the start of the last period on the phase before y (y
// itself while the phase is unknown).
func (m *bucketModel) gridBefore(y stamp) stamp {
	if m.phase.lo.IsZero() {
		return y
	}
	k := time.Duration(floorDiv(int64(y.lo.Sub(m.phase.lo)), int64(m.period)))
	s := stamp{m.phase.lo.Add(k * m.period), m.phase.hi.Add(k * m.period)}
	if s.hi.After(y.lo) {
		// The phases late in the range started their last period before y
		// one period earlier: the start is in (y.lo - period, y.lo]. (A
		// stamp ending after y.lo would let a period start be counted as
		// the phase, before it: TestRollingDeploySettlesEachMoveOnce found
		// it on a loaded machine.)
		s = stamp{y.lo.Add(-m.period + time.Microsecond), y.lo}
	}
	return s
}

// update moves the bucket to s (the same period) at the first decision
// after Update, at an instant of x: the whole periods since r at the old
// rate, then capped at the new limit.
func (m *bucketModel) update(x stamp, s TokenBucket) {
	if s.Period != m.period {
		panic("bucketModel.update: only the limit and the tokens per period may change")
	}
	tlo, thi := m.tokens(x)
	mayFull := thi >= min(m.lim, s.Limit)
	m.lim, m.per = s.Limit, s.TokensPerPeriod
	tlo, thi = min(tlo, m.lim), min(thi, m.lim)
	if mayFull && tlo < m.lim {
		m.phase = hull(m.gridBefore(x), x)
	}
	m.tk, m.asOf = [2]int{tlo, thi}, x
}

// gcraModel follows a GCRA limiter: the bounds of its theoretical arrival
// time (TAT), in units of 1/u µs since origin, exact for an interval of
// q/d µs as the script keeps it.
type gcraModel struct {
	b      int   // the burst
	q, d   int64 // the interval: q/d µs
	u      int64 // units per µs: a multiple of every d the test uses
	origin time.Time
	fresh  bool // no state: every request finds the TAT past
	a      [2]int64
}

// newGCRAModel follows a limiter of settings s, to be moved to each of
// later (update) in turn.
func newGCRAModel(s GCRA, later ...GCRA) *gcraModel {
	q, d := gcraInterval(s)
	u := d
	for _, l := range later {
		_, d2 := gcraInterval(l)
		u = u / new(big.Int).GCD(nil, nil, big.NewInt(u), big.NewInt(d2)).Int64() * d2
	}
	return &gcraModel{b: s.Burst, q: q, d: d, u: u, fresh: true}
}

func gcraInterval(s GCRA) (q, d int64) {
	q, d, err := s.interval()
	if err != nil {
		panic(err)
	}
	return q, d
}

func (m *gcraModel) at(t time.Time) int64 {
	if m.origin.IsZero() {
		m.origin = t
	}
	return t.Sub(m.origin).Microseconds() * m.u
}

func (m *gcraModel) iv() int64 { return m.q * (m.u / m.d) }

func (m *gcraModel) burst(y stamp, n int) (lo, hi int) {
	ylo, yhi := m.at(y.lo), m.at(y.hi)
	// A request at f is granted while the TAT, at least f, plus its permit
	// is at most f + burst intervals: every request is while fewer than
	// burst - ceil((TAT - f)/interval) were granted; and every grant moves
	// the TAT an interval on from at least the first request's instant.
	ahead, first := int64(0), ylo
	if !m.fresh {
		ahead, first = max(m.a[1]-ylo, 0), max(m.a[0], ylo)
	}
	return clampInt(m.b-int(divCeil(ahead, m.iv())), 0, n), clampInt(m.b+int(floorDiv(yhi-first, m.iv())), 0, n)
}

func (m *gcraModel) one(x stamp, k int) (mayGrant, mayRefuse bool, raLo, raHi time.Duration) {
	// The wait: max(TAT - now, 0) + (k - burst) intervals; granted when
	// it is not positive, else RetryAfter is it rounded up to a µs.
	need := int64(k-m.b) * m.iv()
	wlo, whi := need, need
	if !m.fresh {
		wlo += max(m.a[0]-m.at(x.hi), 0)
		whi += max(m.a[1]-m.at(x.lo), 0)
	}
	us := func(w int64) time.Duration { return time.Duration(divCeil(w, m.u)) * time.Microsecond }
	return wlo <= 0, whi > 0, us(max(wlo, 1)), us(whi)
}

func (m *gcraModel) took(y, first stamp, n, need int) {
	if n == 0 {
		if need > 0 && !m.fresh {
			// Refused: the TAT was past now + (burst - need) intervals.
			m.a[0] = max(m.a[0], m.at(y.lo)+int64(m.b-need)*m.iv()+m.u/m.d)
		}
		return
	}
	// After grants at f1 <= ... <= fn, one permit each (or one grant of
	// n), the TAT is the most of max(TAT, f1) + n intervals and each later
	// fi + (n-i+1) intervals; and a grant leaves it at most burst
	// intervals past its instant.
	yhi, flo, fhi := m.at(y.hi), m.at(first.lo), m.at(first.hi)
	t := int64(n) * m.iv()
	lo, hi := flo+t, fhi+t
	if !m.fresh {
		lo, hi = max(m.a[0], flo)+t, max(m.a[1], fhi)+t
	}
	hi = min(max(hi, yhi+t-m.iv()), yhi+int64(m.b)*m.iv())
	m.a, m.fresh = [2]int64{lo, hi}, false
}

// update moves the limiter to s at the first decision after Update, at an
// instant of x: its debt, in permits, is kept at the new interval, rounded
// up to 1/d µs as the script does.
func (m *gcraModel) update(x stamp, s GCRA) {
	q, d := gcraInterval(s)
	if m.u%d != 0 {
		panic("gcraModel.update: settings not given to newGCRAModel")
	}
	if !m.fresh {
		rescale := func(debt int64) int64 { // units
			if debt <= 0 {
				return 0
			}
			w := new(big.Int).Mul(big.NewInt(debt/(m.u/m.d)), big.NewInt(q)) // 1/od µs × q
			w.Add(w, big.NewInt(m.q-1))
			w.Div(w, big.NewInt(m.q)) // 1/d µs, rounded up
			return w.Int64() * (m.u / d)
		}
		xlo, xhi := m.at(x.lo), m.at(x.hi)
		m.a = [2]int64{xlo + rescale(m.a[0]-xhi), xhi + rescale(m.a[1]-xlo)}
	}
	m.b, m.q, m.d = s.Burst, q, d
}

// slidingModel follows a segmented sliding window (SlidingWindow): the
// permits taken, each charged until the end of its segment plus the
// window, both known from the stamp of the step that took it.
type slidingModel struct {
	lim      int
	win, seg int64 // µs
	charges  []charge
}

type charge struct {
	n     int
	ret   [2]int64 // when its permits stop being charged: the earliest, the latest (server µs)
	maybe bool     // a move to other settings may have dropped it
}

func newSlidingModel(s SlidingWindow) *slidingModel {
	win := s.Window.Microseconds()
	return &slidingModel{lim: s.Limit, win: win, seg: divCeil(win, int64(s.Segments))}
}

// ret is when a permit taken at t stops being charged.
func (m *slidingModel) ret(t time.Time) int64 {
	return (floorDiv(t.UnixMicro(), m.seg)+1)*m.seg + m.win
}

// charged returns how many permits are charged at every instant of x, and
// at some instant of x.
func (m *slidingModel) charged(x stamp) (certain, possible int) {
	lo, hi := x.lo.UnixMicro(), x.hi.UnixMicro()
	for _, c := range m.charges {
		if !c.maybe && hi < c.ret[0] {
			certain += c.n
		}
		if lo < c.ret[1] {
			possible += c.n
		}
	}
	return certain, possible
}

func (m *slidingModel) burst(y stamp, n int) (lo, hi int) {
	_, possible := m.charged(y)
	certain, _ := m.charged(y.end())
	// Within the burst, a permit it took is charged a window at least.
	again := m.lim * int(y.width().Microseconds()/m.win)
	return clampInt(m.lim-possible, 0, n), clampInt(m.lim-certain+again, 0, n)
}

func (m *slidingModel) one(x stamp, k int) (mayGrant, mayRefuse bool, raLo, raHi time.Duration) {
	certain, possible := m.charged(x)
	mayGrant, mayRefuse = certain+k <= m.lim, possible+k > m.lim
	// Refused: RetryAfter is until the charges leave room for k: the time
	// the (lim-k+1)-th latest charge ends.
	room := func(rets []int64) int64 {
		slices.Sort(rets)
		if len(rets) < m.lim-k+1 {
			return 0
		}
		return rets[len(rets)-(m.lim-k+1)]
	}
	var los, his []int64
	for _, c := range m.charges {
		for range c.n {
			if !c.maybe {
				los = append(los, c.ret[0])
			}
			his = append(his, c.ret[1])
		}
	}
	return mayGrant, mayRefuse, max(time.Duration(room(los)-x.hi.UnixMicro())*time.Microsecond, time.Microsecond),
		time.Duration(room(his)-x.lo.UnixMicro()) * time.Microsecond
}

func (m *slidingModel) took(y, _ stamp, n, _ int) {
	if n > 0 {
		m.charges = append(m.charges, charge{n: n, ret: [2]int64{m.ret(y.lo), m.ret(y.hi)}})
	}
}

// update moves the window to s at the first decision after Update, at an
// instant of x: each old segment's permits, if both windows still charge
// them then, go to the new segment holding the old segment's end (never
// one after x's), charged until that segment's end plus the new window.
func (m *slidingModel) update(x stamp, s SlidingWindow) {
	win := s.Window.Microseconds()
	seg := divCeil(win, int64(s.Segments))
	xlo, xhi := x.lo.UnixMicro(), x.hi.UnixMicro()
	live := min(m.win, win)
	j := func(end, now int64) int64 { return min(divCeil(end, seg)-1, floorDiv(now, seg)) }
	var kept []charge
	for _, c := range m.charges {
		elo, ehi := c.ret[0]-m.win, c.ret[1]-m.win // the old segment's end
		if ehi+live <= xlo {
			continue
		}
		c.maybe = c.maybe || elo+live <= xhi
		c.ret = [2]int64{(j(elo, xlo)+1)*seg + win, (j(ehi, xhi)+1)*seg + win}
		kept = append(kept, c)
	}
	m.lim, m.win, m.seg, m.charges = s.Limit, win, seg, kept
}

// allOf is a composite's model: a request is granted when every component
// grants it, and a refusal retries after the longest of their waits.
type allOf []model

func (ms allOf) burst(y stamp, n int) (lo, hi int) {
	lo, hi = n, n
	for _, m := range ms {
		l, h := m.burst(y, n)
		lo, hi = min(lo, l), min(hi, h)
	}
	return lo, hi
}

func (ms allOf) one(x stamp, k int) (mayGrant, mayRefuse bool, raLo, raHi time.Duration) {
	mayGrant = true
	for _, m := range ms {
		g, r, lo, hi := m.one(x, k)
		mayGrant, mayRefuse = mayGrant && g, mayRefuse || r
		if !g {
			raLo = max(raLo, lo)
		}
		if r {
			raHi = max(raHi, hi)
		}
	}
	return mayGrant, mayRefuse, max(raLo, time.Microsecond), raHi
}

// took records the step in every component; a refusal says nothing of a
// single one (another may have refused).
func (ms allOf) took(y, first stamp, n, _ int) {
	for _, m := range ms {
		m.took(y, first, n, 0)
	}
}
