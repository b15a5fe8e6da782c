package localrate

import (
	"testing"
	"time"
)

// Over a year, in zones whose daylight-saving changes skip a midnight
// (Santiago, Havana), move by half an hour (Lord Howe) or are ordinary
// (Berlin, New York), every instant lies in [Start, Next(Start)), shares
// its period's local fields with Start, and the next period starts where
// those fields change. (Santiago's and Havana's days after a skipped
// midnight started an hour early, on the day before, and a Lord Howe hour
// ended before it began.)
func TestPeriodBoundariesAcrossDaylightSaving(t *testing.T) {
	for _, zone := range []string{"America/Santiago", "America/Havana", "Australia/Lord_Howe", "Europe/Berlin", "America/New_York", "UTC"} {
		loc, err := time.LoadLocation(zone)
		if err != nil {
			t.Fatal(err)
		}
		for _, letter := range []byte{'h', 'd', 'M'} {
			p := NewPeriod(letter, loc)
			from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			for at := from; at.Before(from.AddDate(1, 0, 0)); at = at.Add(17 * time.Minute) {
				s := p.Start(at)
				n := p.Next(s)
				switch {
				case s.After(at) || !n.After(at):
					t.Fatalf("%s %c at %v: period [%v, %v) does not hold it", zone, letter, at.In(loc), s.In(loc), n.In(loc))
				case p.key(s) != p.key(at):
					t.Fatalf("%s %c at %v: its period starts at %v, in another %c", zone, letter, at.In(loc), s.In(loc), letter)
				case p.key(n.Add(-time.Minute)) != p.key(at):
					t.Fatalf("%s %c at %v: the period ends at %v, before its %c does", zone, letter, at.In(loc), n.In(loc), letter)
				}
			}
		}
	}
}
