package ratelimit

import (
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/localrate"
)

// Alignment says where a [FixedWindow]'s windows start. The zero value
// starts a window at the first acquisition that finds none (each key's
// windows start at their own instants).
type Alignment int8

// The alignments of a [FixedWindow].
const (
	// AlignEpoch starts windows at multiples of Window since the Unix epoch
	// (1970-01-01 00:00 UTC): every key and every replica resets at the
	// same instants. A Window of 24 h resets at midnight UTC.
	AlignEpoch Alignment = iota + 1
	// AlignMinute, AlignHour, AlignDay and AlignMonth start windows at the
	// calendar period's start in the FixedWindow's Location (UTC when
	// nil): a day from midnight to midnight (23 or 25 hours across a
	// daylight-saving change), a month from the 1st at midnight. Window
	// must be zero: the period sets each window's length.
	AlignMinute
	AlignHour
	AlignDay
	AlignMonth
)

// periodLetter is the letter of a calendar alignment in the stored
// settings.
var periodLetter = [...]byte{AlignMinute: 'm', AlignHour: 'h', AlignDay: 'd', AlignMonth: 'M'}

// alignment validates a fixed window's alignment: it returns the
// window length in ms (0 for a calendar period), the suffix of its stored
// settings ("", ":e" or ":<p>:<zone>") and, for a calendar period in a
// zone other than UTC or a month, the calendar that computes its
// boundaries (nil otherwise).
func (c FixedWindow) alignment() (winMs int64, suffix string, cal *localrate.Period, err error) {
	switch {
	case c.Align < 0 || c.Align > AlignMonth:
		return 0, "", nil, check.InvalidArgument("align", "must be AlignEpoch, AlignMinute, AlignHour, AlignDay, AlignMonth or zero, got %d", c.Align)
	case c.Align <= AlignEpoch:
		if c.Location != nil {
			return 0, "", nil, check.InvalidArgument("location", "applies to calendar alignments (AlignMinute ... AlignMonth) only")
		}
		if c.Window < time.Millisecond || c.Window%time.Millisecond != 0 {
			return 0, "", nil, check.InvalidArgument("window", "must be a whole number of milliseconds, at least 1 ms, got %v", c.Window)
		}
		if _, err := micros("window", c.Window, time.Millisecond); err != nil {
			return 0, "", nil, err
		}
		if c.Align == AlignEpoch {
			suffix = ":e"
		}
		return int64(c.Window / time.Millisecond), suffix, nil, nil
	}
	if c.Window != 0 {
		return 0, "", nil, check.InvalidArgument("window", "must be zero with a calendar alignment (the period sets the window), got %v", c.Window)
	}
	loc := c.Location
	if loc == nil {
		loc = time.UTC
	}
	name := loc.String()
	if loc == time.Local || name == "Local" {
		return 0, "", nil, check.InvalidArgument("location", "time.Local names no zone that every replica shares; load one by name (time.LoadLocation)")
	}
	if name == "" || len(name) > 64 || strings.Trim(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/_+-.") != "" {
		return 0, "", nil, check.InvalidArgument("location", "its name must be 1 to 64 letters, digits and /_+-. (an IANA zone name), got %q", name)
	}
	if !sameZone(loc, name) {
		return 0, "", nil, check.InvalidArgument("location", "%q is not the tz database's zone of that name (a time.FixedZone?): every replica and the local fallback load the zone by its name; give time.LoadLocation(%q)", name, name)
	}
	if name == "UTC" && c.Align != AlignMonth {
		// Minutes, hours and days of UTC are multiples since the epoch.
		w := map[Alignment]int64{AlignMinute: 60_000, AlignHour: 3_600_000, AlignDay: 86_400_000}[c.Align]
		return w, ":e", nil, nil
	}
	return 0, ":" + string(periodLetter[c.Align]) + ":" + name, localrate.NewPeriod(periodLetter[c.Align], loc), nil
}

// nominal is the length of a calendar period (the RateLimit-Policy w of a
// calendar window): a day is 24 hours, a month 31 days.
func (a Alignment) nominal() time.Duration {
	switch a {
	case AlignMinute:
		return time.Minute
	case AlignHour:
		return time.Hour
	case AlignDay:
		return 24 * time.Hour
	}
	return 31 * 24 * time.Hour
}

// calendar is the boundary argument of a limiter with calendar windows
// in a zone (a fixed window's, or a composite's fixed components'),
// computed from this process's clock and cached for the current period.
// Its script picks the window holding the server's time; the two clocks
// may differ by up to a period.
type calendar struct {
	// periods: the fixed window's (index 0), or each calendar component's
	// by its index (1 the first) in a composite.
	periods []*localrate.Period
	index   []int
	comp    bool
	// clock is this process's clock (tests set it before first use).
	clock func() time.Time
	arg   atomic.Pointer[calArg]
}

// calArg is one computed argument and the local times it serves.
type calArg struct {
	v           any // a string, boxed once
	from, until time.Time
}

// value returns the argument for now: a fixed window's
// "<b0>,<b1>,<b2>,<b3>" (see [localrate.Period.Bounds]); a composite's
// "@;<i>=<b0>,<b1>,<b2>,<b3>;..." for each calendar component i.
func (c *calendar) value() any {
	now := c.clock()
	if a := c.arg.Load(); a != nil && !now.Before(a.from) && now.Before(a.until) {
		return a.v
	}
	var sb strings.Builder
	a := &calArg{}
	if c.comp {
		sb.WriteByte('@')
	}
	for i, p := range c.periods {
		b, from, until := p.Bounds(now)
		if i == 0 || from.After(a.from) {
			a.from = from
		}
		if i == 0 || until.Before(a.until) {
			a.until = until
		}
		if c.comp {
			sb.WriteByte(';')
			sb.WriteString(strconv.Itoa(c.index[i]))
			sb.WriteByte('=')
		}
		for j, x := range b {
			if j > 0 {
				sb.WriteByte(',')
			}
			sb.WriteString(strconv.FormatInt(x, 10))
		}
	}
	a.v = sb.String()
	c.arg.Store(a)
	return a.v
}

// sameZone reports whether loc is the zone the tz database gives for name
// (compared by their offsets around the year: a zone is stored, and
// loaded by every replica, by its name).
func sameZone(loc *time.Location, name string) bool {
	db, err := time.LoadLocation(name)
	if err != nil {
		return false
	}
	for m := time.January; m <= time.December; m++ {
		t := time.Date(2026, m, 15, 12, 0, 0, 0, time.UTC)
		_, a := t.In(loc).Zone()
		_, b := t.In(db).Zone()
		if a != b {
			return false
		}
	}
	return true
}
