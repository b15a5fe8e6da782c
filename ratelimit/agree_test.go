package ratelimit

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// Each one-limiter decision script agrees with the composite script
// holding that one limiter: random sequences of grants, refusals, probes,
// strict decisions, repeated calls, settlements, refunds (of grants of
// random ages) and moves to other settings, at random times, sent to two
// keys under the same clock, get the same answers and leave the same
// state and expiry. The
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
			var last struct {
				op      string
				permits int
			}
			cur := 0
			for step := range 600 {
				b.Advance(time.Duration(rng.IntN(40000)) * time.Microsecond)
				op, permits := "d", rng.IntN(4)
				switch x := rng.IntN(20); {
				case x < 2 && last.op != "": // the last call again
					op, permits = last.op, last.permits
				case x < 4:
					op = "s"
				case x < 6:
					op, permits = "a", rng.IntN(7)-3
				case x < 8:
					op, permits = "r"+strconv.Itoa(rng.IntN(300000)), 1+rng.IntN(3)
				case x < 9:
					cur = 1 - cur // other settings: the next decision moves the state
				}
				last.op, last.permits = op, permits
				var got [2]any
				var errs [2]error
				for i, sp := range []*spec{one[cur], comp[cur]} {
					k := ko
					if i == 1 {
						k = kc
					}
					if op == "a" || op[0] == 'r' {
						got[i], errs[i] = sp.scripts.adjust.Run(ctx, e, k, sp.args(op, permits)...)
					} else {
						got[i], errs[i] = sp.scripts.decide.Run(ctx, e, k, sp.args(op, permits)...)
					}
				}
				if (errs[0] == nil) != (errs[1] == nil) || (errs[0] != nil && !errors.Is(errs[0], coordination.ErrConfigMismatch)) {
					t.Fatalf("%s step %d %s %d: one-limiter %v, composite %v", name, step, op, permits, errs[0], errs[1])
				}
				if errs[0] != nil {
					continue
				}
				ov, _ := raw.Get(ctx, ko.Full()[0]).Result()
				ch, _ := raw.HGetAll(ctx, kc.Full()[0]).Result()
				ostate := ""
				if ov != "" {
					cfg, rest, _ := strings.Cut(ov, "|")
					ostate = rest
					if cfg != ch["c"] {
						t.Fatalf("%s step %d: settings stored: one-limiter %q, composite %q", name, step, cfg, ch["c"])
					}
				}
				if got[0] != got[1] || ostate != ch["1"] || len(ch) > 2 {
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
