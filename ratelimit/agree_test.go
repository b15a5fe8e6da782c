package ratelimit

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// Each one-limiter decision script agrees with the composite script
// holding that one limiter: random sequences of grants, refusals, probes,
// strict decisions, re-sends, settlements, refunds and moves to other
// settings, at random times, sent to two keys under the same clock, get
// the same answers and leave the same state, ring and expiry. The
// arithmetic is written once (lua/fragments/rl_*.lua) and both scripts
// take it in; this checks what each script adds around it. (miniredis:
// its clock moves only when the test moves it.)
func TestOneLimiterScriptsAgreeWithTheComposite(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		raw := b.Raw(t)
		e, err := engine.Of(b.Coordinator(t))
		if err != nil {
			t.Fatal(err)
		}
		for _, pair := range [][2]Settings{
			{FixedWindow{Limit: 7, Window: 700 * time.Millisecond}, FixedWindow{Limit: 5, Window: 400 * time.Millisecond}},
			{SlidingWindow{Limit: 7, Window: 700 * time.Millisecond, Segments: 4}, SlidingWindow{Limit: 9, Window: 500 * time.Millisecond, Segments: 3}},
			{TokenBucket{Limit: 7, TokensPerPeriod: 2, Period: 90 * time.Millisecond}, TokenBucket{Limit: 5, TokensPerPeriod: 1, Period: 50 * time.Millisecond}},
			{GCRA{Burst: 7, Rate: 10, Period: time.Second}, GCRA{Burst: 4, Interval: time.Second / 3}},
		} {
			var one, comp [2]*spec
			for i, s := range pair {
				if one[i], err = s.spec(); err != nil {
					t.Fatal(err)
				}
				if comp[i], err = (Composite{Components: []Settings{s}}).spec(); err != nil {
					t.Fatal(err)
				}
			}
			name := one[0].cfg
			rng := rand.New(rand.NewPCG(7, uint64(one[0].alg)))
			ko, kc := e.Key("one:"+name), e.Key("comp:"+name)
			var grants []string // ids of granted calls, for refunds
			var last struct {
				op      string
				permits int
				id      string
			}
			cur := 0
			for step := range 600 {
				b.Advance(time.Duration(rng.IntN(40000)) * time.Microsecond)
				op, permits, id := "d", rng.IntN(4), ""
				switch x := rng.IntN(20); {
				case x < 2 && last.op != "": // a re-send of the last call
					op, permits, id = last.op, last.permits, last.id
				case x < 4:
					op = "s"
				case x < 6:
					op, permits = "a", rng.IntN(7)-3
				case x < 8 && len(grants) > 0:
					op, permits, id = "r", 1+rng.IntN(3), *newID()+grants[rng.IntN(len(grants))]
				case x < 9:
					cur = 1 - cur // other settings: the next decision moves the state
				}
				if id == "" && (permits != 0 || op == "a") {
					id = *newID()
				}
				last.op, last.permits, last.id = op, permits, id
				var got [2]any
				var errs [2]error
				for i, sp := range []*spec{one[cur], comp[cur]} {
					k := ko
					if i == 1 {
						k = kc
					}
					if op == "a" || op == "r" {
						got[i], errs[i] = sp.scripts.adjust.Run(ctx, e, k, sp.args(op, permits, id)...)
					} else {
						got[i], errs[i] = sp.scripts.decide.Run(ctx, e, k, sp.args(op, permits, id)...)
					}
				}
				if (errs[0] == nil) != (errs[1] == nil) || (errs[0] != nil && !errors.Is(errs[0], coordination.ErrConfigMismatch)) {
					t.Fatalf("%s step %d %s %d: one-limiter %v, composite %v", name, step, op, permits, errs[0], errs[1])
				}
				if errs[0] != nil {
					continue
				}
				if d, ok := got[0].(decideReply); ok && d.Acquired && permits > 0 {
					grants = append(grants, id)
				}
				ov, _ := raw.Get(ctx, ko.Full()[0]).Result()
				ch, _ := raw.HGetAll(ctx, kc.Full()[0]).Result()
				ostate, oring := "", ""
				if ov != "" {
					cfg, rest, _ := strings.Cut(ov, "|")
					parts := strings.SplitN(rest, "|", stateFields(one[cur].alg)+1)
					ostate, oring = strings.Join(parts[:len(parts)-1], "|"), parts[len(parts)-1]
					if cfg != ch["c"] {
						t.Fatalf("%s step %d: settings stored: one-limiter %q, composite %q", name, step, cfg, ch["c"])
					}
				}
				if got[0] != got[1] || ostate != ch["1"] || oring != ch["r"] {
					t.Fatalf("%s step %d %s %d: one-limiter %+v %q, composite %+v %q", name, step, op, permits, got[0], ov, got[1], ch)
				}
				ot, _ := raw.PTTL(ctx, ko.Full()[0]).Result()
				ct, _ := raw.PTTL(ctx, kc.Full()[0]).Result()
				if ot != ct {
					t.Fatalf("%s step %d: PTTL one-limiter %v, composite %v", name, step, ot, ct)
				}
			}
		}
	}, testharness.Only("miniredis"))
}

// stateFields is how many |-separated fields a one-limiter state has.
func stateFields(alg byte) int {
	if alg == algSliding {
		return 4
	}
	return 2
}
