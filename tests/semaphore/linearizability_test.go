package semaphore_test

import (
	"context"
	"fmt"
	"io/fs"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/redis/go-redis/v9"

	"github.com/coordkit/coordination/internal/decode"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/lua"
	"github.com/coordkit/coordination/semaphore"
	"github.com/coordkit/coordination/tests/lincheck"
)

// The linearizability check records, from several clients at once, every
// call of the semaphore's scripts (acquire, refresh, verify, release) with
// the server time each script ran at, and checks the history against a
// sequential model of a semaphore whose permits expire. A linearization
// must respect real time (an operation that returned before another was
// called comes first) and must never run the server clock backwards;
// expiry is then decided by the model from the recorded times, so
// histories that include expiries are checked too.

// Recording views of the semaphore's scripts: the same .lua files the
// engine declares (internal/engine/scripts_semaphore.go), each wrapped so
// that it also replies with the server time its own TIME call read: the
// script's body runs unchanged inside a function, its redis.call('TIME')
// is routed through one that records the time, and the reply becomes
// {reply, now} (a run that returned before reading the time reads it at
// its end). ok is acquired, refreshed, live or released.
var (
	linAcquireScript = recording("semaphore_acquire")
	linRefreshScript = recording("semaphore_refresh")
	linVerifyScript  = recording("semaphore_verify")
	linReleaseScript = recording("semaphore_release")
)

func recording(name string) *redis.Script {
	src, err := fs.ReadFile(lua.FS(), name+".lua")
	if err != nil {
		panic(err)
	}
	body := strings.ReplaceAll(string(src), "redis.call('TIME')", "rec_time()")
	if body == string(src) {
		panic(name + " reads no TIME")
	}
	return redis.NewScript(`local rec_now
local function rec_time()
  local t = redis.call('TIME')
  rec_now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  return t
end
local function rec_body()
` + body + `
end
local r = rec_body()
if type(r) == 'table' and r.err then
  return r
end
if not rec_now then
  rec_time()
end
return {r, rec_now}`)
}

// member is a permit's sorted-set member, as the semaphore writes it:
// "P:<n>:<token>".
func member(n int64, token string) string { return fmt.Sprintf("P:%d:%s", n, token) }

// runRecorded runs a recording script on the semaphore's key (prefixed
// by e) and decodes {reply, now}: ok is the reply's status (acquire: 0;
// refresh, release: 1; verify: {1, ...}).
func runRecorded(ctx context.Context, e *engine.Engine, key string, script *redis.Script, kind linKind, args ...any) (linOutput, error) {
	v, err := script.Run(ctx, e.Client(), e.Key(key).Full(), args...).Result()
	if err != nil {
		return linOutput{}, err
	}
	a, ok := v.([]any)
	if !ok || len(a) != 2 {
		return linOutput{}, fmt.Errorf("recorded %v: reply %#v", kind, v)
	}
	now, ok := a[1].(int64)
	if !ok {
		return linOutput{}, fmt.Errorf("recorded %v: time %#v", kind, a[1])
	}
	out := linOutput{now: now}
	switch kind {
	case linAcquire:
		r, ok := a[0].(int64)
		if !ok || r < -1 {
			return out, fmt.Errorf("acquire reply %#v", a[0])
		}
		out.ok = r == 0
	case linVerify:
		r, ok := decode.Ints(a[0], 3)
		if !ok || (r[0] != 0 && r[0] != 1) {
			return out, fmt.Errorf("verify reply %#v", a[0])
		}
		out.ok = r[0] == 1
	default:
		r, ok := a[0].(int64)
		if !ok || (r != 0 && r != 1) {
			return out, fmt.Errorf("%v reply %#v", kind, a[0])
		}
		out.ok = r == 1
	}
	return out, nil
}

type linKind int

const (
	linAcquire linKind = iota
	linRefresh
	linVerify
	linRelease
)

func (k linKind) String() string {
	return [...]string{"acquire", "refresh", "verify", "release"}[k]
}

type linInput struct {
	kind  linKind
	token string
	n     int64
	ttl   int64 // ms; 0 = no expiry
}

type linOutput struct {
	ok  bool  // acquired / refreshed / live / released
	now int64 // server time of the script, ms
}

type linPermit struct {
	token string
	n     int64
	exp   int64 // server ms; math.MaxInt64 = no expiry
}

type linState struct {
	now     int64
	permits []linPermit // sorted by token; only live at now
}

func linModel(capacity int64) porcupine.Model {
	return porcupine.Model{
		Init: func() any { return linState{} },
		Step: func(st, in, out any) (bool, any) {
			s, i, o := st.(linState), in.(linInput), out.(linOutput)
			if o.now < s.now {
				return false, nil // the server clock never runs backwards
			}
			// Drop what expired by o.now (it can never come back: time only
			// moves forward along a linearization).
			live := make([]linPermit, 0, len(s.permits)+1)
			var used int64
			mine := -1
			for _, p := range s.permits {
				if p.exp > o.now {
					if p.token == i.token {
						mine = len(live)
					}
					live = append(live, p)
					used += p.n
				}
			}
			exp := int64(math.MaxInt64)
			if i.ttl > 0 {
				exp = o.now + i.ttl
			}
			next := linState{now: o.now, permits: live}
			switch i.kind {
			case linAcquire:
				switch {
				case mine >= 0:
					if !o.ok {
						return false, nil
					}
					live[mine].exp = exp
				case used+i.n <= capacity:
					if !o.ok {
						return false, nil
					}
					next.permits = append(live, linPermit{token: i.token, n: i.n, exp: exp})
					slices.SortFunc(next.permits, func(a, b linPermit) int { return strings.Compare(a.token, b.token) })
				default:
					if o.ok {
						return false, nil
					}
				}
			case linRefresh:
				if o.ok != (mine >= 0) {
					return false, nil
				}
				if mine >= 0 {
					live[mine].exp = exp
				}
			case linVerify:
				if o.ok != (mine >= 0) {
					return false, nil
				}
			case linRelease:
				if o.ok != (mine >= 0) {
					return false, nil
				}
				if mine >= 0 {
					next.permits = slices.Delete(live, mine, mine+1)
				}
			}
			return true, next
		},
		Equal: func(a, b any) bool {
			x, y := a.(linState), b.(linState)
			return x.now == y.now && slices.Equal(x.permits, y.permits)
		},
		DescribeOperation: func(in, out any) string {
			i, o := in.(linInput), out.(linOutput)
			return fmt.Sprintf("%v(%.8s, n=%d, ttl=%d) -> %v @%d", i.kind, i.token, i.n, i.ttl, o.ok, o.now)
		},
	}
}

// TestLinearizability runs 6 clients against one semaphore of capacity 3
// on every real server and checks the recorded history with porcupine.
func TestLinearizability(t *testing.T) {
	const (
		clients  = 6
		opsEach  = 60
		capacity = 3
	)
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		history := lincheck.New()
		var wg sync.WaitGroup
		for c := range clients {
			coord := b.Coordinator(t)
			// The semaphore the scripts run on (New checks the arguments
			// as for a user's), and the engine that runs them.
			if _, err := semaphore.New(coord, "lin", capacity); err != nil {
				t.Fatal(err)
			}
			e, err := engine.Of(coord)
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(uint64(c), uint64(time.Now().UnixNano())))
			// do runs one recorded operation.
			do := func(in linInput) (linOutput, bool) {
				return lincheck.Record(t, history, c, in, func(o linOutput) int64 { return o.now }, func() (linOutput, error) {
					m := member(in.n, in.token)
					switch in.kind {
					case linAcquire:
						return runRecorded(ctx, e, "lin", linAcquireScript, in.kind, m, in.ttl, int64(capacity))
					case linRefresh:
						return runRecorded(ctx, e, "lin", linRefreshScript, in.kind, m, in.ttl)
					case linVerify:
						return runRecorded(ctx, e, "lin", linVerifyScript, in.kind, m)
					default:
						return runRecorded(ctx, e, "lin", linReleaseScript, in.kind, m)
					}
				})
			}
			wg.Go(func() {
				var held *linInput // the acquisition this client holds (or held)
				for range opsEach {
					var in linInput
					ttl := []int64{15, 30, 60, 120, 0}[rng.IntN(5)]
					if held == nil {
						tok, _ := engine.NewToken()
						in = linInput{kind: linAcquire, token: tok, n: 1 + rng.Int64N(2), ttl: ttl}
					} else {
						// The holder renews, checks, releases, or re-sends its
						// acquisition (as go-redis does after a lost reply).
						kind := []linKind{linAcquire, linRefresh, linVerify, linRelease, linRelease}[rng.IntN(5)]
						in = linInput{kind: kind, token: held.token, n: held.n, ttl: ttl}
					}
					out, ok := do(in)
					if !ok {
						return
					}
					if in.kind == linAcquire && out.ok {
						cp := in
						held = &cp
					}
					if in.kind == linRelease {
						held = nil
					}
					// Work (or stall) a while: long enough, at times, for the
					// permit to expire before the holder's next step.
					time.Sleep(time.Duration(rng.IntN(40)) * time.Millisecond)
				}
				if held != nil {
					do(linInput{kind: linRelease, token: held.token, n: held.n})
				}
			})
		}
		wg.Wait()
		if t.Failed() {
			return
		}

		// Figures: how much contention and expiry the history holds.
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
		expired := 0 // refresh/verify/release that found a never-released permit gone: it expired
		for _, op := range ops {
			in, out := op.Input.(linInput), op.Output.(linOutput)
			if in.kind != linAcquire && !out.ok && !released[in.token] {
				expired++
			}
		}
		res, took := history.Check(t, linModel(capacity))
		t.Logf("%s: %d operations from %d clients; acquired %d, refused %d; released %d; refresh ok/gone %d/%d; verify live/gone %d/%d; %d found expired; porcupine: %v in %v",
			b.Name, len(ops), clients, counts["acquire=true"], counts["acquire=false"], counts["release=true"],
			counts["refresh=true"], counts["refresh=false"], counts["verify=true"], counts["verify=false"], expired, res, took.Round(time.Millisecond))
		if res != porcupine.Ok {
			t.FailNow()
		}
		if counts["acquire=false"] == 0 || expired == 0 {
			t.Fatalf("the history lacks contention (%d refused) or expiry (%d): it checks too little", counts["acquire=false"], expired)
		}
	}, testharness.RealOnly())
}

// The model itself must reject a history that breaks the capacity: a
// guard against a model that accepts everything.
func TestLinearizabilityModelRejectsOverCapacity(t *testing.T) {
	op := func(client int, in linInput, out linOutput, call, ret int64) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: in, Output: out, Call: call, Return: ret}
	}
	ok := []porcupine.Operation{
		op(0, linInput{kind: linAcquire, token: "a", n: 2, ttl: 100}, linOutput{ok: true, now: 1000}, 0, 1),
		op(1, linInput{kind: linAcquire, token: "b", n: 2, ttl: 100}, linOutput{ok: false, now: 1001}, 2, 3),
		op(1, linInput{kind: linAcquire, token: "b", n: 2, ttl: 100}, linOutput{ok: true, now: 1100}, 4, 5), // a expired
	}
	if !porcupine.CheckOperations(linModel(3), ok) {
		t.Fatalf("a valid history was rejected")
	}
	bad := slices.Clone(ok)
	bad[1] = op(1, linInput{kind: linAcquire, token: "b", n: 2, ttl: 100}, linOutput{ok: true, now: 1001}, 2, 3)
	if porcupine.CheckOperations(linModel(3), bad) {
		t.Fatalf("a history holding 4 of 3 permits was accepted")
	}
	late := slices.Clone(ok)
	late[2] = op(0, linInput{kind: linRefresh, token: "a", ttl: 100}, linOutput{ok: true, now: 1100}, 4, 5)
	if porcupine.CheckOperations(linModel(3), late) {
		t.Fatalf("a refresh of an expired permit was accepted")
	}
}
