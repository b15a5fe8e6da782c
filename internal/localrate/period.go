package localrate

import (
	"errors"
	"time"
)

// Period is a calendar period in a time zone: the windows of a fixed
// window aligned to minutes, hours, days or months (package ratelimit's
// FixedWindow.Align), whose starts package ratelimit sends its script and
// this package's fixed windows compute. It is immutable.
type Period struct {
	letter byte // m, h, d or M
	loc    *time.Location
}

// NewPeriod returns the period of letter (m minute, h hour, d day, M
// month) in loc, or nil for another letter.
func NewPeriod(letter byte, loc *time.Location) *Period {
	switch letter {
	case 'm', 'h', 'd', 'M':
		return &Period{letter: letter, loc: loc}
	}
	return nil
}

// ParsePeriod reads a stored period: its letter and its zone's name.
func ParsePeriod(letter, zone string) (*Period, error) {
	if len(letter) != 1 || zone == "" || zone == "Local" {
		return nil, ErrSettings
	}
	loc, err := time.LoadLocation(zone)
	if err != nil {
		return nil, errors.Join(ErrSettings, err)
	}
	if p := NewPeriod(letter[0], loc); p != nil {
		return p, nil
	}
	return nil, ErrSettings
}

// nominal is a period's usual length.
func (p *Period) nominal() time.Duration {
	switch p.letter {
	case 'm':
		return time.Minute
	case 'h':
		return time.Hour
	case 'd':
		return 24 * time.Hour
	}
	return 31 * 24 * time.Hour
}

// Start returns the start of the period holding t: where the local
// second (minute), minute and second (hour) are 0, or local midnight (a
// day), of the 1st (a month). A midnight a daylight-saving change skips
// starts its day at the first instant after it that exists.
func (p *Period) Start(t time.Time) time.Time {
	t = t.In(p.loc)
	y, mo, d := t.Date()
	var s time.Time
	switch p.letter {
	case 'm':
		return t.Add(-time.Duration(t.Second())*time.Second - time.Duration(t.Nanosecond()))
	case 'h':
		s = t.Add(-time.Duration(t.Minute())*time.Minute - time.Duration(t.Second())*time.Second - time.Duration(t.Nanosecond()))
	case 'd':
		s = time.Date(y, mo, d, 0, 0, 0, 0, p.loc)
		if s.After(t) {
			s = time.Date(y, mo, d-1, 0, 0, 0, 0, p.loc)
		}
	default:
		s = time.Date(y, mo, 1, 0, 0, 0, 0, p.loc)
		if s.After(t) {
			s = time.Date(y, mo-1, 1, 0, 0, 0, 0, p.loc)
		}
	}
	// A boundary a daylight-saving change skips (a midnight, or an hour
	// start moved by half an hour): the naive start lies in the period
	// before; the period starts at the first minute whose local fields
	// are t's (the change's instant).
	k := p.key(t)
	for i := 0; p.key(s) != k && s.Before(t) && i < maxSteps; i++ {
		s = s.Add(time.Minute)
	}
	return s
}

// maxSteps bounds the minute steps over a daylight-saving change (the
// largest is a day, in a zone that moved across the date line).
const maxSteps = 26 * 60

// key is what the instants of one period share: their local date, and
// for an hour the local hour.
func (p *Period) key(t time.Time) [4]int {
	t = t.In(p.loc)
	y, mo, d := t.Date()
	switch p.letter {
	case 'h':
		return [4]int{y, int(mo), d, t.Hour()}
	case 'd':
		return [4]int{y, int(mo), d, 0}
	}
	return [4]int{y, int(mo), 0, 0}
}

// Next returns the start of the period after the one starting at s.
func (p *Period) Next(s time.Time) time.Time {
	var n time.Time
	s = s.In(p.loc)
	y, mo, d := s.Date()
	switch p.letter {
	case 'm':
		n = p.Start(s.Add(time.Minute))
	case 'h':
		n = p.Start(s.Add(time.Hour))
	case 'd':
		n = time.Date(y, mo, d+1, 0, 0, 0, 0, p.loc)
	default:
		n = time.Date(y, mo+1, 1, 0, 0, 0, 0, p.loc)
	}
	if p.letter != 'm' {
		// A skipped boundary: the naive start lies in s's period; the
		// next period starts at the first minute of another period.
		k := p.key(s)
		for i := 0; (p.key(n) == k || !n.After(s)) && i < maxSteps; i++ {
			n = n.Add(time.Minute)
		}
		if p.key(n) != k {
			n = p.Start(n)
		}
	}
	if !n.After(s) { // a zone's offset moved back across the boundary
		n = s.Add(p.nominal())
	}
	return n
}

// Bounds returns four consecutive period starts in Unix ms: the previous
// period's, the current one's (holding now), the next one's and the one
// after; and the current period, [from, until).
func (p *Period) Bounds(now time.Time) (b [4]int64, from, until time.Time) {
	cur := p.Start(now)
	prev := p.Start(cur.Add(-time.Nanosecond))
	nx := p.Next(cur)
	b = [4]int64{prev.UnixMilli(), cur.UnixMilli(), nx.UnixMilli(), p.Next(nx).UnixMilli()}
	return b, cur, nx
}
