package rwlease_test

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/coordkit/coordination/internal/decode"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/rwlease"
	"github.com/coordkit/coordination/tests/lincheck"
)

// The history check records, from several clients at once, every call of
// the read-write lease's scripts (read and write acquire, refresh, verify,
// release), with the server time each ran at (every reply carries it), and
// checks the history with porcupine against a sequential model of a
// read-write lease whose entries and waiting writers' markers expire. A
// linearization must respect real time and never run the server clock
// backwards; expiry is decided by the model from the recorded times, so
// histories with expiries are checked too.

// Recording views of the scripts: the same .lua files this package declares
// (scripts.go), with decoders that keep the server time and the raw answer
// (ok: acquired, refreshed, live or released).
var (
	linAcquireScript = engine.NewScript("rwlease_acquire", linTriple)
	linRefreshScript = engine.NewScript("rwlease_refresh", linPair)
	linVerifyScript  = engine.NewScript("rwlease_verify", linTriple)
	linReleaseScript = engine.NewScript("rwlease_release", linPair)
)

func linTriple(v any) (linOutput, bool) {
	a, ok := decode.Ints(v, 3)
	return linOutput{ok: ok && a[0] == 1, now: a[2]}, ok && (a[0] == 0 || a[0] == 1) && a[2] > 0
}

func linPair(v any) (linOutput, bool) {
	a, ok := decode.Ints(v, 2)
	return linOutput{ok: ok && a[0] == 1, now: a[1]}, ok && (a[0] == 0 || a[0] == 1) && a[1] > 0
}

type linKind int

const (
	linRead linKind = iota
	linWrite
	linRefresh
	linVerify
	linRelease
)

func (k linKind) String() string {
	return [...]string{"read", "write", "refresh", "verify", "release"}[k]
}

type linInput struct {
	kind   linKind
	mode   rwlease.Mode // of the entry refreshed, verified or released (and of acquires)
	token  string       //
	ttl    int64        // ms
	prefer bool         // read: honour waiting writers
	mark   int64        // write (and phase-fair read): marker lifetime in ms when refused (0: none)
}

type linOutput struct {
	ok  bool
	now int64 // server ms
}

type linEntry struct {
	token string
	mode  rwlease.Mode
	exp   int64
}

type linState struct {
	now     int64
	entries []linEntry // live at now, sorted by token
	markers []linEntry // waiting writers' (mode write) and readers' (mode read) markers live at now, sorted by token
}

func live(es []linEntry, now int64) []linEntry {
	out := make([]linEntry, 0, len(es)+1)
	for _, e := range es {
		if e.exp > now {
			out = append(out, e)
		}
	}
	return out
}

func put(es []linEntry, e linEntry) []linEntry {
	es = slices.DeleteFunc(es, func(x linEntry) bool { return x.token == e.token })
	es = append(es, e)
	slices.SortFunc(es, func(a, b linEntry) int { return cmp.Compare(a.token, b.token) })
	return es
}

func drop(es []linEntry, token string) []linEntry {
	return slices.DeleteFunc(es, func(x linEntry) bool { return x.token == token })
}

func linModel() porcupine.Model {
	return porcupine.Model{
		Init: func() any { return linState{} },
		Step: func(st, in, out any) (bool, any) {
			s, i, o := st.(linState), in.(linInput), out.(linOutput)
			if o.now < s.now {
				return false, nil // the server clock never runs backwards
			}
			next := linState{now: o.now, entries: live(s.entries, o.now), markers: live(s.markers, o.now)}
			mine := slices.IndexFunc(next.entries, func(e linEntry) bool { return e.token == i.token && e.mode == i.mode })
			writer := slices.ContainsFunc(next.entries, func(e linEntry) bool { return e.mode == rwlease.WriteMode })
			writerWaits := slices.ContainsFunc(next.markers, func(e linEntry) bool { return e.mode == rwlease.WriteMode })
			switch i.kind {
			case linRead:
				want := mine >= 0 || (!writer && !(i.prefer && writerWaits))
				if o.ok != want {
					return false, nil
				}
				if want {
					next.entries = put(next.entries, linEntry{i.token, rwlease.ReadMode, o.now + i.ttl})
					next.markers = drop(next.markers, i.token) // the lease overwrites its marker
				} else if i.mark > 0 {
					next.markers = put(next.markers, linEntry{i.token, rwlease.ReadMode, o.now + i.mark})
				}
			case linWrite:
				want := mine >= 0 || len(next.entries) == 0
				if o.ok != want {
					return false, nil
				}
				if want {
					next.entries = put(next.entries, linEntry{i.token, rwlease.WriteMode, o.now + i.ttl})
					next.markers = drop(next.markers, i.token)
				} else if i.mark > 0 {
					next.markers = put(next.markers, linEntry{i.token, rwlease.WriteMode, o.now + i.mark})
				}
			case linRefresh:
				if o.ok != (mine >= 0) {
					return false, nil
				}
				if mine >= 0 {
					next.entries = put(next.entries, linEntry{i.token, i.mode, o.now + i.ttl})
				}
			case linVerify:
				if o.ok != (mine >= 0) {
					return false, nil
				}
			case linRelease:
				if o.ok != (mine >= 0) {
					return false, nil
				}
				next.entries = slices.DeleteFunc(next.entries, func(e linEntry) bool { return e.token == i.token && e.mode == i.mode })
				// A read release removes the reader's member, lease or
				// waiting marker; a write release the writer's marker too.
				next.markers = drop(next.markers, i.token)
				if i.mode == rwlease.WriteMode && mine >= 0 {
					// Phase-fair: the write phase ends; every waiting
					// reader is handed its read lease, expiring with its
					// marker.
					for _, m := range next.markers {
						if m.mode == rwlease.ReadMode {
							next.entries = put(next.entries, m)
						}
					}
					next.markers = slices.DeleteFunc(next.markers, func(e linEntry) bool { return e.mode == rwlease.ReadMode })
				}
			}
			return true, next
		},
		Equal: func(a, b any) bool {
			x, y := a.(linState), b.(linState)
			return x.now == y.now && slices.Equal(x.entries, y.entries) && slices.Equal(x.markers, y.markers)
		},
		DescribeOperation: func(in, out any) string {
			i, o := in.(linInput), out.(linOutput)
			return fmt.Sprintf("%v(%v %.8s, ttl=%d, prefer=%v, mark=%d) -> %v @%d", i.kind, i.mode, i.token, i.ttl, i.prefer, i.mark, o.ok, o.now)
		},
	}
}

// member returns the sorted-set member of a lease of mode m.
func member(m rwlease.Mode, token string) string {
	if m == rwlease.WriteMode {
		return "W:" + token
	}
	return "R:" + token
}

// TestLinearizability runs 6 clients against one read-write lease on every
// real server, with short TTLs and stalls so that leases and markers
// expire during the run, and checks the recorded history with porcupine.
func TestLinearizability(t *testing.T) {
	const (
		clients = 6
		opsEach = 60
	)
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		history := lincheck.New()
		var wg sync.WaitGroup
		for c := range clients {
			e, err := engine.Of(b.Coordinator(t))
			if err != nil {
				t.Fatal(err)
			}
			keys := e.Key("lin")
			rng := rand.New(rand.NewPCG(uint64(c), uint64(time.Now().UnixNano())))
			do := func(in linInput) (linOutput, bool) {
				return lincheck.Record(t, history, c, in, func(o linOutput) int64 { return o.now }, func() (linOutput, error) {
					m := member(in.mode, in.token)
					switch in.kind {
					case linRead:
						prefer := int64(0)
						if in.prefer {
							prefer = 1
						}
						return linAcquireScript.Run(ctx, e, keys, m, in.ttl, prefer, in.mark)
					case linWrite:
						return linAcquireScript.Run(ctx, e, keys, m, in.ttl, in.mark)
					case linRefresh:
						return linRefreshScript.Run(ctx, e, keys, m, in.ttl)
					case linVerify:
						return linVerifyScript.Run(ctx, e, keys, m)
					default:
						return linReleaseScript.Run(ctx, e, keys, m)
					}
				})
			}
			wg.Go(func() {
				var held, waiting *linInput
				for range opsEach {
					ttl := []int64{15, 30, 60, 120}[rng.IntN(4)]
					var in linInput
					switch {
					case held != nil:
						// The holder renews, checks, releases, or re-sends its
						// acquisition (as go-redis does after a lost reply).
						kind := []linKind{held.kind, linRefresh, linVerify, linRelease, linRelease}[rng.IntN(5)]
						in = *held
						in.kind, in.ttl = kind, ttl
					case waiting != nil && rng.IntN(3) > 0:
						in = *waiting // a blocked writer (or phase-fair reader) tries again
						in.ttl = ttl
					case waiting != nil:
						// It gives up.
						in = linInput{kind: linRelease, mode: waiting.mode, token: waiting.token}
					default:
						tok, _ := engine.NewToken()
						if rng.IntN(3) == 0 {
							in = linInput{kind: linWrite, mode: rwlease.WriteMode, token: tok, ttl: ttl, mark: []int64{0, 40}[rng.IntN(2)]}
						} else {
							in = linInput{kind: linRead, mode: rwlease.ReadMode, token: tok, ttl: ttl, prefer: rng.IntN(4) > 0}
							if in.prefer && rng.IntN(2) == 0 {
								in.mark = 40 // a phase-fair blocking Read
							}
						}
					}
					out, ok := do(in)
					if !ok {
						return
					}
					switch {
					case (in.kind == linRead || in.kind == linWrite) && out.ok:
						cp := in
						held, waiting = &cp, nil
					case (in.kind == linWrite || in.kind == linRead) && in.mark > 0:
						cp := in
						waiting = &cp
					case in.kind == linWrite || in.kind == linRead:
						waiting = nil
					case in.kind == linRelease:
						held, waiting = nil, nil
					}
					// Work (or stall) a while: long enough, at times, for a
					// lease or a marker to expire before the next step.
					time.Sleep(time.Duration(rng.IntN(40)) * time.Millisecond)
				}
				if held != nil {
					do(linInput{kind: linRelease, mode: held.mode, token: held.token})
				}
			})
		}
		wg.Wait()
		if t.Failed() {
			return
		}

		ops := history.Operations()
		counts := map[string]int{}
		released := map[string]bool{}
		for _, op := range ops {
			in, out := op.Input.(linInput), op.Output.(linOutput)
			counts[fmt.Sprintf("%v=%v", in.kind, out.ok)]++
			if in.kind == linRelease && out.ok {
				released[in.token] = true
			}
		}
		expired := 0 // refresh/verify/release that found a never-released lease gone: it expired
		for _, op := range ops {
			in, out := op.Input.(linInput), op.Output.(linOutput)
			if (in.kind == linRefresh || in.kind == linVerify || in.kind == linRelease) && !out.ok && !released[in.token] {
				expired++
			}
		}
		res, took := history.Check(t, linModel())
		t.Logf("%s: %d operations from %d clients; reads granted/refused %d/%d, writes granted/refused %d/%d; released %d; %d found expired; porcupine: %v in %v",
			b.Name, len(ops), clients, counts["read=true"], counts["read=false"], counts["write=true"], counts["write=false"],
			counts["release=true"], expired, res, took.Round(time.Millisecond))
		if res != porcupine.Ok {
			t.FailNow()
		}
		if counts["read=false"] == 0 || counts["write=false"] == 0 || counts["read=true"] == 0 || counts["write=true"] == 0 || expired == 0 {
			t.Fatalf("the history lacks refusals, grants or expiries (%v, %d expired): it checks too little", counts, expired)
		}
	}, testharness.RealOnly())
}

// The model itself must reject what a read-write lease forbids: a guard
// against a model that accepts everything.
func TestLinearizabilityModelRejectsViolations(t *testing.T) {
	op := func(client int, in linInput, ok bool, now, call, ret int64) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: in, Output: linOutput{ok: ok, now: now}, Call: call, Return: ret}
	}
	r := func(tok string, prefer bool) linInput {
		return linInput{kind: linRead, mode: rwlease.ReadMode, token: tok, ttl: 100, prefer: prefer}
	}
	w := func(tok string, mark int64) linInput {
		return linInput{kind: linWrite, mode: rwlease.WriteMode, token: tok, ttl: 100, mark: mark}
	}
	pr := func(tok string) linInput { // a phase-fair blocking Read
		return linInput{kind: linRead, mode: rwlease.ReadMode, token: tok, ttl: 100, prefer: true, mark: 50}
	}
	handed := []porcupine.Operation{
		op(0, w("c", 0), true, 1000, 0, 1),
		op(1, pr("a"), false, 1001, 2, 3), // marker until 1051
		op(2, w("d", 40), false, 1002, 4, 5),
		op(0, linInput{kind: linRelease, mode: rwlease.WriteMode, token: "c"}, true, 1003, 6, 7), // hands "a" its lease
		op(2, w("d", 40), false, 1004, 8, 9),                                                     // the handed reader holds
		op(1, pr("a"), true, 1005, 10, 11),                                                       // takes it up
		op(3, r("e", true), false, 1006, 12, 13),                                                 // a new reader waits for the writer
	}
	if !porcupine.CheckOperations(linModel(), handed) {
		t.Fatal("a valid phase-fair history was rejected")
	}
	valid := []porcupine.Operation{
		op(0, r("a", true), true, 1000, 0, 1),
		op(1, r("b", true), true, 1001, 2, 3),     // readers share
		op(2, w("c", 50), false, 1002, 4, 5),      // refused; marker until 1052
		op(3, r("d", true), false, 1003, 6, 7),    // queued behind the waiting writer
		op(3, r("d", false), true, 1004, 8, 9),    // without preference: in
		op(2, w("c", 50), true, 1200, 10, 11),     // every reader expired
		op(1, r("e", false), false, 1201, 12, 13), // the writer holds
	}
	if !porcupine.CheckOperations(linModel(), valid) {
		t.Fatal("a valid history was rejected")
	}
	for name, bad := range map[string][]porcupine.Operation{
		"writer with a live reader": {op(0, r("a", true), true, 1000, 0, 1), op(1, w("c", 0), true, 1001, 2, 3)},
		"reader with a live writer": {op(0, w("c", 0), true, 1000, 0, 1), op(1, r("a", false), true, 1001, 2, 3)},
		"reader past a waiting writer": {op(0, r("a", true), true, 1000, 0, 1), op(1, w("c", 50), false, 1001, 2, 3),
			op(2, r("b", true), true, 1002, 4, 5)},
		"refresh of an expired reader": {op(0, r("a", true), true, 1000, 0, 1),
			op(0, linInput{kind: linRefresh, mode: rwlease.ReadMode, token: "a", ttl: 100}, true, 1100, 2, 3)},
		"two writers": {op(0, w("c", 0), true, 1000, 0, 1), op(1, w("d", 0), true, 1001, 2, 3)},
		"waiting reader not handed the next phase": {op(0, w("c", 0), true, 1000, 0, 1), op(1, pr("a"), false, 1001, 2, 3),
			op(0, linInput{kind: linRelease, mode: rwlease.WriteMode, token: "c"}, true, 1002, 4, 5),
			op(2, linInput{kind: linVerify, mode: rwlease.ReadMode, token: "a"}, false, 1003, 6, 7)},
		"writer past a handed read phase": {op(0, w("c", 0), true, 1000, 0, 1), op(1, pr("a"), false, 1001, 2, 3),
			op(0, linInput{kind: linRelease, mode: rwlease.WriteMode, token: "c"}, true, 1002, 4, 5),
			op(2, w("d", 0), true, 1003, 6, 7)},
	} {
		if porcupine.CheckOperations(linModel(), bad) {
			t.Errorf("a history with a %s was accepted", name)
		}
	}
}
