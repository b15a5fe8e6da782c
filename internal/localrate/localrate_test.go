package localrate

import (
	"errors"
	"testing"
)

func TestParse(t *testing.T) {
	for _, bad := range []string{"", "f", "f:1", "f:1:2:3", "s:1:2", "s:1:2:1025", "x:1:2:3", "g:0:1:1", "b:1:2:-3", "gg:1:1:1", "g:1:1:9007199254740992"} {
		if _, err := Parse(bad); !errors.Is(err, ErrSettings) {
			t.Errorf("Parse(%q) = %v, want ErrSettings", bad, err)
		}
	}
	for _, good := range []string{"f:1:1", "s:5:1000:1024", "b:7:2:90000", "g:7:100000:1"} {
		if _, err := Parse(good); err != nil {
			t.Errorf("Parse(%q) = %v", good, err)
		}
	}
}

// fdiv and fmod are Lua's floored integer division and modulo.
func TestFloored(t *testing.T) {
	for _, c := range [][4]int64{{7, 2, 3, 1}, {-7, 2, -4, 1}, {7, -2, -4, -1}, {-7, -2, 3, -1}, {6, 3, 2, 0}, {-6, 3, -2, 0}} {
		if q, r := fdiv(c[0], c[1]), fmod(c[0], c[1]); q != c[2] || r != c[3] {
			t.Errorf("%d / %d: %d rem %d, want %d rem %d", c[0], c[1], q, r, c[2], c[3])
		}
	}
}

// A GCRA state answers as the script: the burst, then one permit per
// interval, a batch whole or not at all, a probe that takes nothing, the
// state gone (expired) once the burst is back; other settings of another
// number of components are refused, changing nothing.
func TestGCRA(t *testing.T) {
	set, err := ParseAll([]string{"g:3:1000:1"}) // 3 at once, then one per ms
	if err != nil {
		t.Fatal(err)
	}
	var s State
	now := int64(1_000_000_000)
	for i, want := range []Reply{{Acquired: true, Available: 2, Mark: now}, {Acquired: true, Available: 1, Mark: now}, {Acquired: true, Available: 0, Mark: now}, {Available: 0, Wait: 1000}} {
		if r, err := s.Do(set, Decide, 1, 0, now); err != nil || r != want {
			t.Fatalf("decision %d: %+v %v, want %+v", i, r, err, want)
		}
	}
	if r, _ := s.Do(set, Decide, 2, 0, now+1000); r.Acquired || r.Wait != 1000 || r.Available != 1 {
		t.Fatalf("a batch of 2 with 1 free: %+v", r)
	}
	if r, _ := s.Do(set, Decide, 0, 0, now+1000); !r.Acquired || r.Available != 1 {
		t.Fatalf("probe: %+v", r)
	}
	if s.Empty(now + 2999) {
		t.Fatal("empty before the burst is back")
	}
	if !s.Empty(now + 3000) {
		t.Fatal("not empty once the burst is back")
	}
	two, _ := ParseAll([]string{"g:3:1000:1", "f:1:1"})
	if _, err := s.Do(two, Decide, 1, 0, now+1000); !errors.Is(err, ErrSettings) {
		t.Fatalf("two components on a state of one: %v", err)
	}
}
