package ratelimit

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// A local limiter decides as the scripts do: the same random sequence of
// decisions (probes, batches, refundable grants), refunds of earlier
// grants, settlements of reservations and updates to other settings, at
// random times, on a Redis limiter and on a local one whose clock is the
// server's, gets the same answers: granted or not, Available and
// RetryAfter, whether a refund gave anything back, and Settle's figure.
// (miniredis: its clock moves only when the test moves it.)
func TestLocalAgreesWithTheScripts(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		c := b.Coordinator(t)
		clock := withLocalClock(func() int64 { return b.Now().UnixMicro() })
		for _, pair := range [][2]Settings{
			{FixedWindow{Limit: 7, Window: 700 * time.Millisecond}, FixedWindow{Limit: 5, Window: 400 * time.Millisecond}},
			{SlidingWindow{Limit: 7, Window: 700 * time.Millisecond, Segments: 4}, SlidingWindow{Limit: 9, Window: 500 * time.Millisecond, Segments: 3}},
			{TokenBucket{Limit: 7, TokensPerPeriod: 2, Period: 90 * time.Millisecond}, TokenBucket{Limit: 5, TokensPerPeriod: 1, Period: 50 * time.Millisecond}},
			{GCRA{Burst: 7, Rate: 10, Period: time.Second}, GCRA{Burst: 4, Interval: time.Second / 3}},
			{Composite{Components: []Settings{
				TokenBucket{Limit: 6, TokensPerPeriod: 1, Period: 60 * time.Millisecond},
				SlidingWindow{Limit: 9, Window: 400 * time.Millisecond, Segments: 4},
				FixedWindow{Limit: 12, Window: 500 * time.Millisecond},
				GCRA{Burst: 8, Interval: 40 * time.Millisecond},
			}}, Composite{Components: []Settings{
				TokenBucket{Limit: 4, TokensPerPeriod: 2, Period: 80 * time.Millisecond},
				SlidingWindow{Limit: 5, Window: 300 * time.Millisecond, Segments: 2},
				FixedWindow{Limit: 9, Window: 300 * time.Millisecond},
				GCRA{Burst: 5, Rate: 20, Period: time.Second},
			}}},
		} {
			sp, err := pair[0].spec()
			if err != nil {
				t.Fatal(err)
			}
			name := sp.cfg
			rl, err := New(c, "agree:"+name, pair[0])
			if err != nil {
				t.Fatal(err)
			}
			ll, err := NewLocal(pair[0], clock)
			if err != nil {
				t.Fatal(err)
			}
			lims := [2]*Limiter{rl, ll}
			reserves := sp.alg == algBucket || sp.alg == algGCRA
			var grants [2][]result
			var resv [2][]*Reservation
			rng := rand.New(rand.NewPCG(11, uint64(sp.alg)))
			cur, grantsSeen, refused := 0, 0, 0
			for step := range 800 {
				b.Advance(time.Duration(rng.IntN(30000)) * time.Microsecond)
				x, permits, k, actual := rng.IntN(20), rng.IntN(4), rng.IntN(8), rng.IntN(10)
				var got [2]string
				for i, l := range lims {
					switch {
					case x < 1: // other settings
						if i == 0 {
							cur = 1 - cur
						}
						if err := l.Update(ctx, pair[cur]); err != nil {
							t.Fatal(err)
						}
					case x < 4 && len(grants[i]) > 0: // a refund of an earlier grant
						k := k % len(grants[i])
						g := grants[i][k]
						grants[i] = append(grants[i][:k], grants[i][k+1:]...)
						ok, err := g.refund(ctx)
						got[i] = fmt.Sprint(ok, err)
					case x < 6 && reserves && len(resv[i]) > 0: // a settlement
						r := resv[i][0]
						resv[i] = resv[i][1:]
						n, err := r.Settle(ctx, actual)
						got[i] = fmt.Sprint(n, err)
					case x < 8 && reserves:
						r, err := l.Reserve(ctx, 1+permits%3)
						if err != nil {
							t.Fatal(err)
						}
						if r.Allowed() {
							resv[i] = append(resv[i], r)
						}
						got[i] = fmtDecision(r.Decision)
					default:
						r, err := l.allow(ctx, permits, refundable)
						if err != nil {
							t.Fatal(err)
						}
						if r.acquired && r.mark >= 0 && len(grants[i]) < 8 {
							grants[i] = append(grants[i], r)
						}
						got[i] = fmtDecision(r.decision())
						if i == 0 && permits > 0 {
							if r.acquired {
								grantsSeen++
							} else {
								refused++
							}
						}
					}
				}
				got[0] = strings.Replace(got[0], ` "agree:`+name+`"`, "", 1) // the local limiter's errors name no key
				if got[0] != got[1] {
					t.Fatalf("%s step %d (x=%d): Redis %s, local %s", name, step, x, got[0], got[1])
				}
				if len(grants[0]) != len(grants[1]) || len(resv[0]) != len(resv[1]) {
					t.Fatalf("%s step %d: %d/%d grants, %d/%d reservations", name, step, len(grants[0]), len(grants[1]), len(resv[0]), len(resv[1]))
				}
			}
			if grantsSeen < 30 || refused < 30 {
				t.Fatalf("%s: %d grants and %d refusals: the sequence does not exercise both", name, grantsSeen, refused)
			}
		}
	}, testharness.Only("miniredis"))
}

func fmtDecision(d Decision) string {
	ra, ok := d.RetryAfter()
	return fmt.Sprint(d.Allowed(), d.Available(), ra, ok)
}
