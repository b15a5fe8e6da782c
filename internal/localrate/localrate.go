// Package localrate is the in-process twin of package ratelimit's decision
// scripts (lua/ratelimit_fixed, _sliding, _bucket, _gcra and
// _composite, whose arithmetic is lua/fragments/rl_*.lua): the same
// fixed-window, sliding-window, token-bucket and GCRA arithmetic, the
// same moves to other settings, refunds and adjustments, the same
// whole-or-nothing composite decision, on a state kept in memory instead
// of a Redis key, with a clock the caller passes (microseconds).
//
// It follows the composite script for every limiter (a single limiter is
// a composite of one, which the scripts' agreement test shows gives the
// same answers), so a grant's mark is the decision's time; except that a
// fixed window alone follows ratelimit_fixed's refund rule (its grant's
// mark is its window's end, and only that window takes a refund). The
// state expires, as the key would, at its expiry in whole milliseconds.
// Settings are the scripts' cfg strings ("f:<limit>:<window_ms>", aligned
// "f:<limit>:<window_ms>:e" or "f:<limit>:0:<p>:<zone>",
// "s:<limit>:<window_us>:<segments>", "b:<limit>:<per>:<period_us>",
// "g:<burst>:<q>:<d>"), validated by package ratelimit before they get
// here. Nothing here is public API. A State is not safe for concurrent
// use: its owner serializes calls.
package localrate

import (
	"errors"
	"strconv"
	"strings"
	"time"
)

// maxN is 2^53: every number a script stores stays below it.
const maxN = int64(1) << 53

// ErrRange is the error of an adjustment that would take the state out of
// its range (the scripts' COORD_BADARG for it); nothing is changed.
var ErrRange = errors.New("the adjustment would take the limiter state out of range")

// ErrSettings is the error of malformed or mismatched settings (another
// algorithm or number of components than the stored state's: the
// scripts' COORD_BADARG and COORD_CONFIG_MISMATCH); nothing is changed.
var ErrSettings = errors.New("malformed or mismatched limiter settings")

// Op is a call's operation, as the scripts' ARGV[1].
type Op byte

const (
	// Decide takes permits if every component admits them (d; D with
	// Reply.Mark).
	Decide Op = 'd'
	// Adjust charges permits (negative: gives them back): a settlement (a).
	Adjust Op = 'a'
	// Refund gives permits of the grant whose mark is given back, as far
	// as the state provably still holds them (r<mark>).
	Refund Op = 'r'
)

// Reply is a call's answer, as the scripts reply it.
type Reply struct {
	// Acquired: a decision was granted (a probe: a permit is free).
	Acquired bool
	// Applied: an adjustment or refund changed the state.
	Applied bool
	// Available is the fewest permits any component has free after the
	// call.
	Available int64
	// Wait is, for a refused decision, the time in microseconds (>= 1)
	// until it could be granted, or -1 when never.
	Wait int64
	// Mark is a granted decision's mark (its time), for a refund.
	Mark int64
}

// Setting is one component's parsed settings.
type Setting struct {
	cfg        string
	alg        byte
	n1, n2, n3 int64
	// A fixed window's alignment: 0 none, 'e' multiples of n2 since the
	// epoch, 'c' the calendar period per (n2 0).
	align byte
	per   *Period
}

// Parse reads one cfg string.
func Parse(cfg string) (Setting, error) {
	parts := strings.Split(cfg, ":")
	s := Setting{cfg: cfg}
	if len(cfg) < 1 {
		return s, ErrSettings
	}
	s.alg = cfg[0]
	want := 4
	if s.alg == 't' || s.alg == 'l' {
		want = 3
	}
	if s.alg == 'f' {
		want = 3
		switch {
		case len(parts) == 4 && parts[3] == "e":
			s.align, parts = 'e', parts[:3]
		case len(parts) == 5 && parts[2] == "0":
			p, err := ParsePeriod(parts[3], parts[4])
			if err != nil {
				return s, ErrSettings
			}
			s.align, s.per, parts = 'c', p, parts[:3]
		}
	}
	if len(parts) != want || len(parts[0]) != 1 || !strings.ContainsRune("fsbgtl", rune(s.alg)) {
		return s, ErrSettings
	}
	var ns [3]int64
	for i, p := range parts[1:] {
		n, err := strconv.ParseInt(p, 10, 64)
		if err != nil || (n < 1 && !(s.align == 'c' && i == 1 && n == 0)) || n >= maxN {
			return s, ErrSettings
		}
		ns[i] = n
	}
	s.n1, s.n2, s.n3 = ns[0], ns[1], ns[2]
	if s.alg == 'l' && s.n1 > 1000 {
		return s, ErrSettings
	}
	if s.alg == 't' && s.n2 >= maxN/1000 {
		return s, ErrSettings
	}
	if s.alg == 's' && s.n3 > 1024 {
		return s, ErrSettings
	}
	return s, nil
}

// ParseAll reads the cfg strings of a limiter's components.
func ParseAll(cfgs []string) ([]Setting, error) {
	out := make([]Setting, len(cfgs))
	for i, c := range cfgs {
		var err error
		if out[i], err = Parse(c); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// State is one limiter's state: what its Redis key would hold.
type State struct {
	set      []Setting // the stored settings; nil: no state
	comps    []comp
	expireUs int64      // the key's expiry: gone at or after this time (µs)
	lg       []logEntry // a sliding log's entries, oldest first
	scratch  []work
}

// comp is one component's state, under its stored settings.
type comp struct {
	// fixed: e (window end, ms; 0: none), u (used)
	// sliding: n (total), o, l (oldest, newest segment), cs (counts o..l;
	// nil: none)
	// bucket: tk (tokens), r (refill period start)
	// gcra: a, b (arrival time a + b/d µs)
	// throttle: n (count), o (the run's first attempt), l (its latest)
	e, u  int64
	n     int64
	o, l  int64
	cs    []int64
	tk, r int64
	a, b  int64
}

// Empty reports whether the state holds nothing (the key would not exist)
// at now.
func (s *State) Empty(now int64) bool { return len(s.set) == 0 || now >= s.expireUs }

// Reset drops the state.
func (s *State) Reset() { s.set, s.comps = s.set[:0], s.comps[:0] }

// fdiv and fmod are Lua's floored division and modulo on integers.
func fdiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

func fmod(a, b int64) int64 { return a - fdiv(a, b)*b }

// ceilMs is (de + 999) floored to ms: the key's expiry for a state empty
// at de µs.
func ceilMs(de int64) int64 { return fdiv(de+999, 1000) }

// work is one component during a call: its settings, its state brought
// to now, and the call's figures.
type work struct {
	st           Setting
	c            comp
	rm           int64 // the charge to apply when m < 0
	rj           int64 // sliding refund: the grant's segment
	hasRJ        bool
	rq           int64 // gcra refund in 1/d µs
	av, wt, de   int64
	lim, g, span int64 // fixed/sliding/bucket limit, sliding segment, gcra span
}

// Do runs one call with settings set (the caller's, in order) at now
// (µs): op with permits (>= 0 for Decide, >= 1 for Refund, any for
// Adjust) and, for Refund, the grant's mark. It returns the reply, or an
// error with nothing changed.
func (s *State) Do(set []Setting, op Op, permits, mark, now int64) (Reply, error) {
	if len(s.set) > 0 && now >= s.expireUs {
		s.Reset()
	}
	stored := len(s.set) > 0
	if stored && len(s.set) != len(set) {
		return Reply{}, ErrSettings
	}
	if len(set) == 1 && set[0].alg == 't' {
		return s.throttle(set[0], op, permits, mark, now)
	}
	if len(set) == 1 && set[0].alg == 'l' {
		return s.log(set[0], op, permits, mark, now)
	}
	for i := range set {
		if set[i].alg == 't' || set[i].alg == 'l' {
			return Reply{}, ErrSettings
		}
	}
	want, m := permits, permits
	if want < 1 {
		want = 1
	}
	if op == Refund {
		m = -permits
	}
	// A fixed window alone follows ratelimit_fixed: its grant's mark is
	// its window's end (ms), and a refund gives back only to that window.
	fe := len(set) == 1 && set[0].alg == 'f'
	if cap(s.scratch) < len(set) {
		s.scratch = make([]work, len(set))
	}
	ws := s.scratch[:len(set)]
	clear(ws)
	var mav, mwt, mde int64
	gives := false
	for i := range set {
		w := &ws[i]
		w.st = set[i]
		var old *Setting
		if stored {
			old = &s.set[i]
			if old.alg != set[i].alg {
				return Reply{}, ErrSettings
			}
			w.c = s.comps[i]
			w.c.cs = append([]int64(nil), w.c.cs...)
		}
		switch set[i].alg {
		case 'f':
			w.fixedLoad(old, now)
			w.fixedRefund(op, m, mark, fe)
			w.fixedWait(want, now)
			w.fixedSum(now)
		case 's':
			w.slidingLoad(old, now)
			w.slidingRefund(op, m, mark)
			w.slidingWait(want, now)
			w.slidingSum(now)
		case 'b':
			w.bucketLoad(old, now)
			w.bucketRefund(op, m, mark)
			w.bucketWait(want, now)
			w.bucketSum(now)
		case 'g':
			w.gcraLoad(old, now)
			w.gcraRefund(op, m, mark, now)
			w.gcraWait(want, now)
			w.gcraSum(now)
		default:
			return Reply{}, ErrSettings
		}
		if i == 0 || w.av < mav {
			mav = w.av
		}
		if w.wt < 0 || mwt == -1 {
			mwt = -1
		} else if i == 0 || w.wt > mwt {
			mwt = w.wt
		}
		if i == 0 || w.de > mde {
			mde = w.de
		}
		gives = gives || w.rm != 0
	}
	rm := int64(0)
	if gives {
		rm = m
	}
	answer := (op == Decide && (mwt != 0 || permits == 0)) || (op == Refund && rm == 0)
	if answer {
		if stored && mde <= now {
			s.Reset()
		}
		switch {
		case op == Refund:
			return Reply{Available: mav}, nil
		case mwt != 0:
			return Reply{Available: mav, Wait: mwt}, nil
		}
		return Reply{Acquired: true, Available: mav}, nil
	}
	for i := range ws {
		w := &ws[i]
		var err error
		switch w.st.alg {
		case 'f':
			w.fixedTake(m, now)
			w.fixedSum(now)
		case 's':
			err = w.slidingTake(m, now)
			w.slidingSum(now)
		case 'b':
			err = w.bucketTake(m, now)
			w.bucketSum(now)
		case 'g':
			err = w.gcraTake(op, m, now)
			w.gcraSum(now)
		}
		if err != nil {
			return Reply{}, err
		}
		if i == 0 || w.av < mav {
			mav = w.av
		}
		if i == 0 || w.de > mde {
			mde = w.de
		}
	}
	if mde <= now {
		s.Reset()
	} else {
		s.set = append(s.set[:0], set...)
		s.comps = s.comps[:0]
		for i := range ws {
			s.comps = append(s.comps, ws[i].c)
		}
		s.expireUs = ceilMs(mde) * 1000
	}
	if op == Adjust || op == Refund {
		return Reply{Applied: true, Available: mav}, nil
	}
	if fe {
		return Reply{Acquired: true, Available: mav, Mark: ws[0].c.e}, nil
	}
	return Reply{Acquired: true, Available: mav, Mark: now}, nil
}

func clamp(v, hi int64) int64 {
	if v < 0 {
		return 0
	}
	if v > hi {
		return hi
	}
	return v
}

// --- fixed window (rl_fixed): lim, win ms; e ms, u.

func (w *work) fixedLoad(old *Setting, now int64) {
	w.lim = w.st.n1
	if old == nil {
		w.c.e, w.c.u = 0, 0
	}
	if w.c.e*1000 <= now {
		w.c.e, w.c.u = 0, 0
	}
}

func (w *work) fixedRefund(op Op, m, mark int64, fe bool) {
	w.rm = m
	if op == Refund && (w.c.e == 0 || (fe && w.c.e != mark) || (!fe && w.fixedStart()*1000 > mark)) {
		w.rm = 0
	}
}

// fixedStart is the start (ms) of the window ending at e: e less the
// window; a calendar window's, the start of the period before e.
func (w *work) fixedStart() int64 {
	if w.st.align == 'c' {
		return w.st.per.Start(time.UnixMilli(w.c.e - 1)).UnixMilli()
	}
	return w.c.e - w.st.n2
}

func (w *work) fixedWait(want, now int64) {
	switch {
	case want > w.lim:
		w.wt = -1
	case w.c.u+want <= w.lim:
		w.wt = 0
	default:
		w.wt = w.c.e*1000 - now
	}
}

func (w *work) fixedSum(now int64) {
	w.av = clamp(w.lim-w.c.u, w.lim)
	w.de = w.c.e * 1000
}

func (w *work) fixedTake(m, now int64) {
	if m < 0 {
		w.c.u += w.rm
		if w.c.u < 0 {
			w.c.u = 0
		}
		return
	}
	if w.c.e == 0 {
		ms := fdiv(now, 1000)
		switch w.st.align {
		case 'e':
			w.c.e = ms - ms%w.st.n2 + w.st.n2
		case 'c':
			w.c.e = w.st.per.Next(w.st.per.Start(time.UnixMilli(ms))).UnixMilli()
		default:
			w.c.e = ms + w.st.n2
		}
	}
	w.c.u += m
	if w.c.u >= 1e14 {
		w.c.u = 1e14 - 1
	}
}

// --- sliding window (rl_sliding): lim, win µs, segs, g; n, o, l, cs.

func segLen(win, segs int64) int64 { return fdiv(win+segs-1, segs) }

func (w *work) slidingLoad(old *Setting, now int64) {
	lim, win, segs := w.st.n1, w.st.n2, w.st.n3
	w.lim = lim
	g := segLen(win, segs)
	w.g = g
	c := &w.c
	var ow, og int64
	if old != nil {
		ow, og = old.n2, segLen(old.n2, old.n3)
	} else {
		c.cs = nil
	}
	same := old != nil && old.cfg == w.st.cfg
	for pass := 1; pass <= 2; pass++ {
		w_, g_ := ow, og
		if pass == 2 {
			w_, g_ = win, g
		}
		if c.cs != nil {
			cut := fdiv(now-w_, g_)
			if c.o < cut {
				idx, left := 0, c.n
				for c.o <= c.l {
					x := c.cs[idx]
					if c.o >= cut && x > 0 {
						break
					}
					c.o, idx, left = c.o+1, idx+1, left-x
				}
				c.n, c.cs = left, c.cs[idx:]
				if c.o > c.l {
					c.cs = nil
				}
			}
		}
		if pass == 2 || same {
			break
		}
		if c.cs != nil {
			k := fdiv(now, g)
			acc := map[int64]int64{}
			var lo, hi int64
			has := false
			for i, x := range c.cs {
				e := (c.o + int64(i) + 1) * og // the old segment's end
				if x > 0 && e+ow > now && e+win > now {
					j := fdiv(e+g-1, g) - 1
					if j > k {
						j = k
					}
					if base := k - segs - 3; j < base {
						j = base
					}
					acc[j] += x
					if !has || j < lo {
						lo = j
					}
					if !has || j > hi {
						hi = j
					}
					has = true
				}
			}
			c.n, c.cs = 0, nil
			if has {
				c.cs = make([]int64, 0, hi-lo+1)
				for j := lo; j <= hi; j++ {
					c.cs = append(c.cs, acc[j])
					c.n += acc[j]
				}
				c.o, c.l = lo, hi
			}
		}
	}
	if c.cs == nil {
		c.n = 0
	}
}

func (w *work) slidingRefund(op Op, m, mark int64) {
	w.rm = m
	if op != Refund {
		return
	}
	w.rj, w.hasRJ = fdiv(mark, w.g), true
	var have int64
	for i, x := range w.c.cs {
		if w.c.o+int64(i) == w.rj { // the grant's own segment only (as rl_sliding.lua)
			have += x
		}
	}
	if have < -w.rm {
		w.rm = -have
	}
}

func (w *work) slidingWait(want, now int64) {
	lim, c := w.lim, &w.c
	switch {
	case want > lim:
		w.wt = -1
	case lim-c.n >= want:
		w.wt = 0
	default:
		// The window may hold more than lim (moved from a larger limit):
		// what is over lim must leave too (as rl_sliding.wait).
		need, freed, j := want-(lim-c.n), int64(0), c.o
		for _, x := range c.cs {
			freed, j = freed+x, j+1
			if freed >= need {
				break
			}
		}
		w.wt = j*w.g + w.st.n2 - now
	}
}

func (w *work) slidingSum(now int64) {
	w.av = clamp(w.lim-w.c.n, w.lim)
	w.de = now
	if w.c.cs != nil {
		w.de = (w.c.l+1)*w.g + w.st.n2
	}
}

func (w *work) slidingTake(m, now int64) error {
	c := &w.c
	if m > 0 || (m == 0 && c.cs != nil) {
		k := fdiv(now, w.g)
		switch {
		case c.cs == nil:
			c.o, c.l, c.cs = k, k, []int64{m}
		case k <= c.l:
			c.cs[len(c.cs)-1] += m
		default:
			for j := c.l + 1; j < k; j++ {
				c.cs = append(c.cs, 0)
			}
			c.cs = append(c.cs, m)
			c.l = k
		}
		c.n += m
		if c.n >= maxN {
			return ErrRange
		}
		return nil
	}
	if c.cs == nil {
		return nil
	}
	t := c.cs
	// Newest first; a refund oldest first from its grant's segment.
	j, last, step := int64(len(t)-1), int64(0), int64(-1)
	if w.hasRJ {
		j, last, step = max(w.rj-c.o, 0), int64(len(t)-1), 1
	}
	left := -w.rm
	for left > 0 && (j-last)*step <= 0 {
		x := min(t[j], left)
		t[j], left, c.n = t[j]-x, left-x, c.n-x
		j += step
	}
	f := 0
	for f < len(t) && t[f] == 0 {
		f++
	}
	if f == len(t) {
		c.cs = nil
	} else {
		c.o, c.cs = c.o+int64(f), t[f:]
	}
	return nil
}

// --- token bucket (rl_bucket): lim, per, period µs; tk, r.

func (w *work) bucketLoad(old *Setting, now int64) {
	lim, per, period := w.st.n1, w.st.n2, w.st.n3
	w.lim = lim
	c := &w.c
	if old == nil {
		c.tk, c.r = lim, now
		return
	}
	same := old.cfg == w.st.cfg
	for pass := 1; pass <= 2; pass++ {
		l_, p_, d_ := old.n1, old.n2, old.n3
		if pass == 2 {
			l_, p_, d_ = lim, per, period
		}
		if c.tk < l_ && now > c.r {
			k := fdiv(now-c.r, d_)
			fill := l_ - c.tk + p_ - 1
			if k >= fdiv(fill, p_) {
				c.tk = l_
			} else {
				c.tk, c.r = c.tk+k*p_, c.r+k*d_
			}
		}
		if c.tk >= l_ {
			c.tk, c.r = l_, now
		}
		if same {
			break
		}
		if c.tk >= lim {
			c.tk, c.r = lim, now
		}
	}
}

func (w *work) bucketRefund(op Op, m, mark int64) {
	w.rm = m
	if op == Refund && w.c.r > mark {
		w.rm = 0
	}
}

func (w *work) bucketWait(want, now int64) {
	per, period, c := w.st.n2, w.st.n3, &w.c
	switch {
	case want > w.lim:
		w.wt = -1
	case c.tk >= want:
		w.wt = 0
	default:
		short := want - c.tk + per - 1
		w.wt = c.r + fdiv(short, per)*period - now
	}
}

func (w *work) bucketSum(now int64) {
	per, period, c := w.st.n2, w.st.n3, &w.c
	w.av = max(c.tk, 0)
	if c.tk >= w.lim {
		w.de = now
	} else {
		short := w.lim - c.tk + per - 1
		w.de = c.r + fdiv(short, per)*period
	}
}

func (w *work) bucketTake(m, now int64) error {
	per, period, c := w.st.n2, w.st.n3, &w.c
	tk := c.tk
	if m < 0 {
		tk -= w.rm
	} else {
		tk -= m
	}
	if m < 0 && tk >= w.lim {
		c.tk, c.r = w.lim, now
		return nil
	}
	if tk < 0 {
		short := w.lim - tk + per - 1
		if short >= maxN || c.r+fdiv(short, per)*period >= maxN {
			return ErrRange
		}
	}
	c.tk = tk
	return nil
}

// --- GCRA (rl_gcra): x, q, d, span; a, b.

func (w *work) gcraLoad(old *Setting, now int64) {
	x, q, d := w.st.n1, w.st.n2, w.st.n3
	w.lim, w.span = x, x*q
	c := &w.c
	if old == nil || c.a < now {
		c.a, c.b = now, 0
	}
	if old != nil && old.cfg != w.st.cfg {
		oq, od := old.n2, old.n3
		v := (c.a-now)*od + c.b
		k, r := fdiv(v, oq), fmod(v, oq)
		v = k*q + fdiv(r*q+oq-1, oq)
		c.a, c.b = now+fdiv(v, d), fmod(v, d)
	}
}

func (w *work) gcraRefund(op Op, m, mark, now int64) {
	w.rm, w.rq = m, -m*w.st.n2
	if op == Refund && now > mark {
		w.rq -= (now - mark) * w.st.n3
		if w.rq <= 0 {
			w.rm, w.rq = 0, 0
		}
	}
}

func (w *work) gcraWait(want, now int64) {
	q, d, c := w.st.n2, w.st.n3, &w.c
	if want > w.lim {
		w.wt = -1
		return
	}
	wt := (c.a-now)*d + c.b + want*q - w.span
	if wt <= 0 {
		w.wt = 0
	} else {
		w.wt = fdiv(wt+d-1, d)
	}
}

func (w *work) gcraSum(now int64) {
	q, d, c := w.st.n2, w.st.n3, &w.c
	w.av = clamp(fdiv(w.span-(c.a-now)*d-c.b, q), w.lim)
	w.de = c.a
	if c.b > 0 {
		w.de = c.a + 1
	}
}

func (w *work) gcraTake(op Op, m, now int64) error {
	q, d, c := w.st.n2, w.st.n3, &w.c
	if m >= 0 {
		v := c.b + m*q
		a, b := c.a+fdiv(v, d), fmod(v, d)
		if op == Adjust && (v >= maxN || (a-now)*d+b >= maxN-now) {
			return ErrRange
		}
		c.a, c.b = a, b
		return nil
	}
	v := (c.a-now)*d + c.b - w.rq
	if v < 0 {
		v = 0
	} else if v >= maxN-now {
		return ErrRange
	}
	c.a, c.b = now+fdiv(v, d), fmod(v, d)
	return nil
}

// --- throttle (ratelimit_throttle): lim, q ms; n, o (run start), l (latest attempt).

// throttle is Do for a throttle (alone: never a composite's component).
func (s *State) throttle(set Setting, op Op, permits, mark, now int64) (Reply, error) {
	var c comp
	if len(s.set) > 0 {
		if s.set[0].alg != 't' || len(s.set) != 1 {
			return Reply{}, ErrSettings
		}
		c = s.comps[0]
	}
	lim, qu := set.n1, set.n2*1000
	want, m := max(permits, 1), permits
	if op == Refund {
		m = -permits
	}
	if len(s.set) == 0 || c.l+qu <= now || c.n == 0 {
		c.n, c.o, c.l = 0, now, now
	}
	rm := m
	if op == Refund && (c.n == 0 || c.o > mark) {
		rm = 0
	}
	var wt int64
	switch {
	case want > lim:
		wt = -1
	case c.n+want <= lim:
		wt = 0
	default:
		wt = c.l + qu - now
	}
	av := max(lim-c.n, 0)
	store := func() {
		if c.n == 0 {
			s.Reset()
			return
		}
		s.set = append(s.set[:0], set)
		s.comps = append(s.comps[:0], c)
		s.expireUs = ceilMs(c.l+qu) * 1000
	}
	if op == Decide && wt > 0 && permits > 0 {
		c.l = max(c.l, now)
		store()
		return Reply{Available: av, Wait: c.l + qu - now}, nil
	}
	if (op == Decide && (wt != 0 || permits == 0)) || (op == Refund && rm == 0) {
		if c.n == 0 {
			s.Reset()
		}
		switch {
		case op == Refund:
			return Reply{Available: av}, nil
		case wt != 0:
			return Reply{Available: av, Wait: wt}, nil
		}
		return Reply{Acquired: true, Available: av}, nil
	}
	if m > 0 {
		c.n = min(c.n+m, 1e14-1)
		c.l = max(c.l, now)
	} else {
		c.n = max(c.n+rm, 0)
	}
	av = max(lim-c.n, 0)
	store()
	if op == Adjust || op == Refund {
		return Reply{Applied: true, Available: av}, nil
	}
	return Reply{Acquired: true, Available: av, Mark: now}, nil
}

// --- sliding log (ratelimit_log): lim, win µs; lg.

// logEntry is a sliding log's entry: k permits charged at t (µs).
type logEntry struct{ t, k int64 }

// log is Do for a sliding log (alone: never a composite's component).
func (s *State) log(set Setting, op Op, permits, mark, now int64) (Reply, error) {
	var lg []logEntry
	if len(s.set) > 0 {
		if s.set[0].alg != 'l' || len(s.set) != 1 {
			return Reply{}, ErrSettings
		}
		lg = s.lg
	}
	lim, win := set.n1, set.n2
	want, m := max(permits, 1), permits
	if op == Refund {
		m = -permits
	}
	live := make([]logEntry, 0, len(lg)+1)
	var n int64
	for _, e := range lg {
		if e.t+win > now {
			live = append(live, e)
			n += e.k
		}
	}
	rm, rj := m, -1
	if op == Refund {
		var have int64
		for i, e := range live {
			if e.t == mark { // the grant's own entry only (as ratelimit_log.lua)
				if rj < 0 {
					rj = i
				}
				have += e.k
			}
		}
		if have < -rm {
			rm = -have
		}
	}
	var wt int64
	switch {
	case want > lim:
		wt = -1
	case n+want <= lim:
		wt = 0
	default:
		need, acc, j := n+want-lim, int64(0), -1
		for acc < need && j < len(live)-1 {
			j++
			acc += live[j].k
		}
		wt = live[j].t + win - now
	}
	av := max(lim-n, 0)
	if (op == Decide && (wt != 0 || permits == 0)) || (op == Refund && rm == 0) {
		if len(live) == 0 {
			s.Reset()
		}
		switch {
		case op == Refund:
			return Reply{Available: av}, nil
		case wt != 0:
			return Reply{Available: av, Wait: wt}, nil
		}
		return Reply{Acquired: true, Available: av}, nil
	}
	full := m < 0 || (m > 0 && len(live) > 0 && live[len(live)-1].t >= now)
	switch {
	case !full:
		// Append one entry at now; past lim entries the two oldest merge
		// into the later one's time.
		if n+m >= 1e15 {
			m = 1e15 - 1 - n
		}
		if m > 0 {
			live = append(live, logEntry{now, m})
		}
		for int64(len(live)) > lim {
			live[1].k += live[0].k
			live = live[1:]
		}
	case m > 0:
		if n+m >= 1e15 {
			m = 1e15 - 1 - n
		}
		live[len(live)-1].k += m
	default:
		left, i, step := -rm, len(live)-1, -1
		if rj >= 0 {
			i, step = rj, 1
		}
		for left > 0 && i >= 0 && i < len(live) {
			x := min(live[i].k, left)
			live[i].k, left = live[i].k-x, left-x
			i += step
		}
	}
	out := live[:0]
	n = 0
	for _, e := range live {
		if e.k > 0 {
			out = append(out, e)
			n += e.k
		}
	}
	av = max(lim-n, 0)
	if len(out) == 0 {
		s.Reset()
	} else {
		s.set = append(s.set[:0], set)
		s.comps = append(s.comps[:0], comp{})
		s.lg = out
		s.expireUs = ceilMs(out[len(out)-1].t+win) * 1000
	}
	if op == Adjust || op == Refund {
		return Reply{Applied: true, Available: av}, nil
	}
	return Reply{Acquired: true, Available: av, Mark: now}, nil
}
