package ratelimit

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// The decision script's fast paths (a grant under the stored settings)
// agree with its general path: random sequences of grants, refusals and
// probes at random times, sent once with the fast paths allowed (d) and
// once with them off (t) to two keys under the same clock, give the same
// answers and the same stored states. (miniredis: the clock must not move
// between the two.)
func TestFastPathsAgreeWithTheGeneralPath(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		c := b.Coordinator(t)
		raw := b.Raw(t)
		e, err := engine.Of(c)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []Settings{
			FixedWindow{Limit: 7, Window: 700 * time.Millisecond},
			SlidingWindow{Limit: 7, Window: 700 * time.Millisecond, Segments: 4},
			TokenBucket{Limit: 7, TokensPerPeriod: 2, Period: 90 * time.Millisecond},
			GCRA{Burst: 7, Rate: 10, Period: time.Second},
			GCRA{Burst: 7, Interval: time.Second / 3},
		} {
			sp, err := s.spec()
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(1, uint64(sp.alg)))
			fast, slow := e.Key("fast:"+sp.cfg), e.Key("slow:"+sp.cfg)
			for step := range 400 {
				b.Advance(time.Duration(rng.IntN(60000)) * time.Microsecond)
				permits := rng.IntN(4)
				id := ""
				if permits > 0 {
					id = *newID()
				}
				var got [2]decideReply
				for i, op := range []string{"d", "t"} {
					k := fast
					if op == "t" {
						k = slow
					}
					got[i], err = decideScript.Run(ctx, e, k, append([]any{op, permits, id}, sp.tail...)...)
					if err != nil {
						t.Fatalf("%s step %d (%s): %v", sp.cfg, step, op, err)
					}
				}
				fv, _ := raw.Get(ctx, fast.Full()[0]).Result()
				sv, _ := raw.Get(ctx, slow.Full()[0]).Result()
				// The rings may differ: a fast-path key can outlive the
				// moment its state is back to empty (its TTL is a bound),
				// keeping older ids a little longer.
				if got[0] != got[1] || withoutRing(fv) != withoutRing(sv) {
					t.Fatalf("%s step %d, %d permits: fast %+v %q, general %+v %q", sp.cfg, step, permits, got[0], fv, got[1], sv)
				}
			}
		}
	}, testharness.Only("miniredis"))
}

// withoutRing returns a one-limiter state without its ring of ids.
func withoutRing(v string) string {
	n := 3 // settings and two fields
	if strings.HasPrefix(v, "s:") {
		n = 5
	}
	parts := strings.SplitN(v, "|", n+1)
	if len(parts) <= n {
		return v
	}
	return strings.Join(parts[:n], "|")
}
