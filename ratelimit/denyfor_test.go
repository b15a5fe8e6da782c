package ratelimit

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/sentinel"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// A timed denial (a lockout) refuses the identity until it ends by the
// server's clock, then not; it never shortens a longer or endless denial;
// Remove ends it; each DenyFor deletes the entries that ended; its end is
// the server's now plus the duration rounded up to whole ms.
func TestDenyForEnds(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		c := b.Coordinator(t)
		raw := b.Raw(t)
		list, err := NewDenyList(c, "lockout", WithDenyCache(16, 0)) // no cache: every check reads
		if err != nil {
			t.Fatal(err)
		}
		denied := func(id string) bool {
			t.Helper()
			ok, err := list.Denied(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			return ok
		}
		score := func(id string) string {
			t.Helper()
			return strconv.FormatFloat(raw.ZScore(ctx, b.Key("lockout"), id).Val(), 'f', -1, 64)
		}
		sc := serverClock(t, b)
		var st stamp
		st = sc.around(func() {
			if err := list.DenyFor(ctx, "ip:1", 1500*time.Microsecond+10*time.Second); err != nil { // rounded up: 10.002 s
				t.Fatal(err)
			}
		})
		got, _ := strconv.ParseInt(score("ip:1"), 10, 64)
		if lo, hi := st.lo.UnixMilli()+10002, st.hi.UnixMilli()+10002; got < lo || got > hi {
			t.Fatalf("the denial ends at %d, want in [%d, %d]", got, lo, hi)
		}
		if !denied("ip:1") || denied("ip:2") {
			t.Fatalf("ip:1 denied %v, ip:2 denied %v; want true, false", denied("ip:1"), denied("ip:2"))
		}
		l := build(t, c, kGCRA, "lockout:limiter", 3, time.Minute, WithDenyList(list, "ip:1"))
		if le := acquire(t, l, 1); !le.Denied() {
			t.Fatal("a limiter bound to a locked-out identity granted")
		}
		// Never shortened: a shorter DenyFor keeps the end; Deny makes it
		// endless, and a DenyFor then keeps that.
		if err := list.DenyFor(ctx, "ip:1", time.Second); err != nil {
			t.Fatal(err)
		}
		if s := score("ip:1"); s != strconv.FormatInt(got, 10) {
			t.Fatalf("a shorter DenyFor changed the end to %s, want %d", s, got)
		}
		if err := list.Deny(ctx, "ip:3"); err != nil {
			t.Fatal(err)
		}
		if err := list.DenyFor(ctx, "ip:3", time.Millisecond); err != nil {
			t.Fatal(err)
		}
		if s := score("ip:3"); s != "+Inf" {
			t.Fatalf("DenyFor on an endless denial set its score to %s", s)
		}
		// Remove ends a timed denial.
		if err := list.DenyFor(ctx, "ip:4", time.Hour); err != nil {
			t.Fatal(err)
		}
		if err := list.Remove(ctx, "ip:4"); err != nil || denied("ip:4") {
			t.Fatalf("after Remove: %v, denied %v", err, denied("ip:4"))
		}
		// The end: a 50 ms lockout is over once 50 ms of server time passed.
		if err := list.DenyFor(ctx, "ip:5", 50*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		if b.IsMini() {
			b.Advance(49 * time.Millisecond)
			if !denied("ip:5") {
				t.Fatal("ip:5 no longer denied 1 ms before its end")
			}
			b.Advance(time.Millisecond)
		} else {
			time.Sleep(60 * time.Millisecond)
		}
		if denied("ip:5") {
			t.Fatal("ip:5 still denied after its end")
		}
		// The next DenyFor deletes the ended entry.
		if err := list.DenyFor(ctx, "ip:6", time.Hour); err != nil {
			t.Fatal(err)
		}
		if n := raw.ZScore(ctx, b.Key("lockout"), "ip:5").Err(); n == nil {
			t.Fatal("the ended entry of ip:5 is still stored")
		}
		if !denied("ip:1") || !denied("ip:3") || !denied("ip:6") {
			t.Fatal("a live denial was lost")
		}
	})
}

// The local cache never uses a timed denial past its end, whatever its
// lifetime.
func TestDenyForCache(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		defer clock(b)() // miniredis' clock follows the wall clock
		ctx := context.Background()
		list, err := NewDenyList(b.Coordinator(t), "lockout:cached", WithDenyCache(16, MaxDenyCacheLifetime))
		if err != nil {
			t.Fatal(err)
		}
		if err := list.DenyFor(ctx, "ip:1", 200*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		if ok, err := list.Denied(ctx, "ip:1"); err != nil || !ok {
			t.Fatalf("Denied = %v, %v; want true", ok, err)
		}
		time.Sleep(300 * time.Millisecond)
		if ok, err := list.Denied(ctx, "ip:1"); err != nil || ok {
			t.Fatalf("Denied after the lockout ended = %v, %v; want false (the cache kept it past its end)", ok, err)
		}
	})
}

// DenyFor's bad input names the argument and sends nothing.
func TestDenyForRefuses(t *testing.T) {
	b := testharness.Get(t, "miniredis")
	c := b.Coordinator(t)
	counter := testharness.CountCommands(c.Client())
	list, err := NewDenyList(c, "lockout:bad")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		id   string
		d    time.Duration
		name string
	}{
		{"ip:1", 0, "duration"},
		{"ip:1", -time.Second, "duration"},
		{"ip:1", 999 * time.Microsecond, "duration"},
		{"ip:1", 40 * 365 * 24 * time.Hour, "duration"},
		{"", time.Second, "identity"},
		{"", 0, "identity"},
	} {
		err := list.DenyFor(context.Background(), tc.id, tc.d)
		if name, _ := check.ArgumentName(err); name != tc.name || !isErr(err, sentinel.ErrInvalidArgument) {
			t.Errorf("DenyFor(%q, %v) = %v, want an invalid argument naming %s", tc.id, tc.d, err, tc.name)
		}
	}
	if n := counter.Count(); n != 0 {
		t.Fatalf("bad input sent %d commands %v", n, counter.Names())
	}
}

// A deny list in the layout before timed denials (a plain set, as an
// operator's SADD writes it) still works for reads, Deny and Remove; a
// timed denial on it is refused with ErrBadState, nothing written.
func TestDenyListPlainSet(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Raw(t)
		if err := raw.SAdd(ctx, b.Key("plain"), "ip:1").Err(); err != nil {
			t.Fatal(err)
		}
		list, err := NewDenyList(b.Coordinator(t), "plain", WithDenyCache(16, 0))
		if err != nil {
			t.Fatal(err)
		}
		for id, want := range map[string]bool{"ip:1": true, "ip:2": false} {
			if got, err := list.Denied(ctx, id); err != nil || got != want {
				t.Fatalf("Denied(%s) on a plain set = %v, %v; want %v", id, got, err, want)
			}
		}
		if err := list.Deny(ctx, "ip:2"); err != nil {
			t.Fatal(err)
		}
		if err := list.Remove(ctx, "ip:1"); err != nil {
			t.Fatal(err)
		}
		if m := raw.SMembers(ctx, b.Key("plain")).Val(); len(m) != 1 || m[0] != "ip:2" {
			t.Fatalf("the plain set holds %v, want [ip:2]", m)
		}
		if err := list.DenyFor(ctx, "ip:3", time.Minute); !isErr(err, sentinel.ErrBadState) {
			t.Fatalf("DenyFor on a plain set: %v, want ErrBadState", err)
		}
		if err := raw.Set(ctx, b.Key("plain:string"), "x", 0).Err(); err != nil {
			t.Fatal(err)
		}
		str, err := NewDenyList(b.Coordinator(t), "plain:string", WithDenyCache(16, 0))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := str.Denied(ctx, "ip:1"); !isErr(err, sentinel.ErrBadState) {
			t.Fatalf("Denied on a string: %v, want ErrBadState", err)
		}
		for _, f := range []func() error{
			func() error { return str.Deny(ctx, "ip:1") },
			func() error { return str.Remove(ctx, "ip:1") },
			func() error { return str.DenyFor(ctx, "ip:1", time.Minute) },
		} {
			if err := f(); !isErr(err, sentinel.ErrBadState) {
				t.Fatalf("a write on a string: %v, want ErrBadState", err)
			}
		}
		if v := raw.Get(ctx, b.Key("plain:string")).Val(); v != "x" {
			t.Fatalf("the string became %q", v)
		}
	})
}
