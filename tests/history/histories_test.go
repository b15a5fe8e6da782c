package history

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/tests/lincheck"
)

// workload is one primitive's histories: clients concurrent clients, each
// running run (a few random operations recorded with lincheck.Do) on the
// history's key.
type workload struct {
	name    string
	clients int
	model   func() porcupine.Model
	// longest: a history with a call this long or longer is set aside
	// (see lincheck.History.Longest): the shortest TTL the workload uses.
	longest time.Duration
	run     func(w *hctx)
	// check runs checks without a model (rate bounds); nil when none.
	check func(h *lincheck.History) error
	// keys are the history's keys that outlive it (fence counters, latch
	// keys, fenced resources), deleted after it.
	keys func(key string) []string
	// needs says whether a backend has what the workload needs (nil:
	// every backend does).
	needs func(b *testharness.Backend) bool
}

// hctx is one client's part of one history.
type hctx struct {
	t     testing.TB
	h     *lincheck.History
	c     int
	coord *coordination.Coordinator
	key   string
	rng   *rand.Rand
	ids   *atomic.Int64
}

// id returns a fresh handle id for the history.
func (w *hctx) id() string { return fmt.Sprintf("%d.%d", w.c, w.ids.Add(1)) }

// op returns the context of one recorded call.
func (w *hctx) op() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), opTimeout)
}

// pause sleeps up to most.
func (w *hctx) pause(most time.Duration) {
	time.Sleep(time.Duration(w.rng.Int64N(int64(most) + 1)))
}

// pick returns one of vs at random.
func pick[T any](rng *rand.Rand, vs ...T) T { return vs[rng.IntN(len(vs))] }

// stats are one stream's figures (one primitive on one backend).
type stats struct {
	histories, checked, faulted, setAside, violations, timeouts int
	ops, unknown, faults                                        int
	dropped, replaced, injected, delayed, cuts, kills           int
	took, checking, slowest                                     time.Duration
}

func (s *stats) add(o stats) {
	s.histories += o.histories
	s.checked += o.checked
	s.faulted += o.faulted
	s.setAside += o.setAside
	s.violations += o.violations
	s.timeouts += o.timeouts
	s.ops += o.ops
	s.unknown += o.unknown
	s.faults += o.faults
	s.dropped += o.dropped
	s.replaced += o.replaced
	s.injected += o.injected
	s.delayed += o.delayed
	s.cuts += o.cuts
	s.kills += o.kills
	s.took = max(s.took, o.took)
	s.checking += o.checking
	s.slowest = max(s.slowest, o.slowest)
}

// table collects the streams' figures for the report.
type table struct {
	mu sync.Mutex
	m  map[[2]string]stats
}

func (tb *table) put(primitive, backend string, s stats) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if tb.m == nil {
		tb.m = map[[2]string]stats{}
	}
	tb.m[[2]string{primitive, backend}] = s
}

// report returns the figures as a table: per primitive, per backend, the
// histories checked with faults (and in all), set aside, violations; and
// per primitive the operations and faults.
func (tb *table) report() string {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	var prims, backs []string
	for k := range tb.m {
		if !slices.Contains(prims, k[0]) {
			prims = append(prims, k[0])
		}
		if !slices.Contains(backs, k[1]) {
			backs = append(backs, k[1])
		}
	}
	order := func(names []string) func(i, j int) bool {
		return func(i, j int) bool {
			return slices.Index(testharness.BackendNames(), names[i]) < slices.Index(testharness.BackendNames(), names[j])
		}
	}
	sort.Strings(prims)
	sort.Slice(backs, order(backs))
	var b strings.Builder
	fmt.Fprintf(&b, "%-12s", "primitive")
	for _, bk := range backs {
		fmt.Fprintf(&b, " %16s", bk)
	}
	fmt.Fprintf(&b, " %6s %6s %7s %7s %5s %5s %7s\n", "total", "viol.", "ops", "unknown", "aside", "incon", "faults")
	for _, p := range prims {
		var tot stats
		fmt.Fprintf(&b, "%-12s", p)
		for _, bk := range backs {
			s := tb.m[[2]string{p, bk}]
			tot.add(s)
			fmt.Fprintf(&b, " %16s", fmt.Sprintf("%d/%d v%d", s.faulted, s.histories, s.violations))
		}
		fmt.Fprintf(&b, " %6d %6d %7d %7d %5d %5d %7d\n", tot.faulted, tot.violations, tot.ops, tot.unknown, tot.setAside, tot.timeouts, tot.faults)
	}
	b.WriteString("(per backend: histories checked with at least one fault / histories run, v = violations; ops: operations\n" +
		"recorded, unknown: of them with an unknown outcome; aside: histories set aside (a re-sent call longer than a TTL),\n" +
		"incon: checks given up after " + checkTimeout.String() + "; faults: injected faults that fired, cuts and CLIENT KILLs included)")
	return b.String()
}

// TestHistories checks, on every real backend, histories of every
// primitive recorded under faults (see the package documentation): at
// least COORD_HISTORIES (40 by default) histories with faults per
// primitive and backend, each linearizable against its model.
func TestHistories(t *testing.T) {
	target := envInt(t, "COORD_HISTORIES", 40)
	var tb table
	start := time.Now()
	t.Cleanup(func() {
		t.Logf("checked histories under faults, %v:\n%s", time.Since(start).Round(time.Second), tb.report())
	})
	only := os.Getenv("COORD_HISTORY_ONLY") // a workload's name, for quick runs
	// Every stream (a primitive on a backend) is started at once and runs
	// when it gets one of streamSlots (t.Parallel would also pause the
	// backends' parent subtests). t.Run may be called from several
	// goroutines at once.
	var wg sync.WaitGroup
	for _, name := range testharness.BackendNames() {
		if name == "miniredis" {
			continue // the histories need real servers (TTLs, faults)
		}
		wg.Go(func() {
			t.Run(name, func(t *testing.T) {
				b := testharness.Get(t, name)
				var streams sync.WaitGroup
				for _, w := range workloads() {
					if (only != "" && w.name != only) || (w.needs != nil && !w.needs(b)) {
						continue
					}
					streams.Go(func() {
						t.Run(w.name, func(t *testing.T) {
							streamSlots <- struct{}{}
							defer func() { <-streamSlots }()
							s := runStream(t, b, w, target, time.Time{}, nil)
							tb.put(w.name, b.Name, s)
							t.Logf("%s on %s: %d histories checked with faults (%d run, %d set aside), %d operations (%d unknown), %d faults (%d lost replies, %d replaced, %d errors instead, %d delayed, %d cuts, %d kills), %d violations, %v (checking %v, slowest %v)",
								w.name, b.Name, s.faulted, s.histories, s.setAside, s.ops, s.unknown, s.faults, s.dropped, s.replaced,
								s.injected, s.delayed, s.cuts, s.kills, s.violations, s.took.Round(time.Millisecond),
								s.checking.Round(time.Millisecond), s.slowest.Round(time.Millisecond))
							if s.faulted < target {
								t.Errorf("%d histories checked with faults, want at least %d", s.faulted, target)
							}
						})
					})
				}
				streams.Wait()
			})
		})
	}
	wg.Wait()
}

// streamSlots bounds the streams that run at once (two per core), and
// checkSlots the checks. A history is CPU-bound (its calls, the fault
// proxies and the clients, under the race detector), not sleep-bound: a
// stream alone runs ten in 2 to 9 s. More streams at once make calls slow
// enough to time out (unknown outcomes), and histories with many unknown
// outcomes take exponential time to check, which slows the calls further:
// with 12 at once on 2 cores, 40% of the first streams' calls timed out on
// a quiet machine, and with a second job loading the cores, Cluster streams
// fell short of their histories within the budget (70% unknown).
var (
	streamSlots = make(chan struct{}, 2*runtime.GOMAXPROCS(0))
	checkSlots  = make(chan struct{}, 2)
)

// checkTimeout bounds the check of one history. A history checks in
// milliseconds; one with many unknown outcomes (an overloaded machine)
// may take exponential time: such a check is given up, not counted.
const checkTimeout = 10 * time.Second

// runStream runs w's histories on b one after another: until target of
// them had faults and were checked (at most 3*target histories, within
// COORD_HISTORY_BUDGET), or, when until is set, until then. Histories
// delete the keys that outlive them (workload.keys) unless r is given
// (the soak: its rig, whose keys are inspected afterwards).
func runStream(t *testing.T, b *testharness.Backend, w workload, target int, until time.Time, r *rig) stats {
	start := time.Now()
	keep := r != nil
	if r == nil {
		r = newRig(t, b, w.name)
	}
	coords := make([]*coordination.Coordinator, w.clients)
	for i := range coords {
		coords[i] = r.coord()
	}
	model := w.model()
	h := fnv.New64a()
	_, _ = h.Write([]byte(b.Name + "/" + w.name))
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("COORD_HISTORY_SEED"); v != "" {
		// Replays a logged run's random choices (the workload's calls and
		// the faults' schedule; timing still differs from run to run).
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("COORD_HISTORY_SEED=%q: not an unsigned integer", v)
		}
		seed = n
	}
	t.Logf("%s on %s: seed %d (COORD_HISTORY_SEED replays it)", w.name, b.Name, seed)
	rng := rand.New(rand.NewPCG(seed, h.Sum64()))
	var s stats
	budget := envDuration(t, "COORD_HISTORY_BUDGET", 4*time.Minute)
	more := func(i int) bool {
		if !until.IsZero() {
			return time.Now().Before(until)
		}
		return s.faulted < target && i < 3*target && time.Since(start) < budget
	}
	for i := 0; more(i); i++ {
		key := fmt.Sprintf("{h%d}", i)
		fired, resent, hist := runHistory(t, r, w, coords, key, rng, keep)
		s.histories++
		s.ops += hist.Len()
		s.unknown += hist.Unknown()
		s.faults += fired
		for _, err := range hist.Failures() {
			t.Errorf("history %d: a call failed with a definite error (not ambiguous): %v", i, err)
		}
		if len(resent) > 0 && hist.Longest(resent...) >= w.longest {
			s.setAside++
			continue
		}
		checkSlots <- struct{}{}
		checkStart := time.Now()
		res := hist.CheckTimed(t, model, checkTimeout)
		<-checkSlots
		s.checking += time.Since(checkStart)
		s.slowest = max(s.slowest, time.Since(checkStart))
		switch res {
		case porcupine.Ok:
			s.checked++
			if fired > 0 {
				s.faulted++
			}
		case porcupine.Illegal:
			s.violations++
			t.Errorf("history %d of %s on %s (key %s, seed %d) violates the model", i, w.name, b.Name, key, seed)
		default:
			s.timeouts++ // inconclusive: neither counted nor failed
			t.Logf("history %d of %s on %s: the check took longer than %v (%d operations, %d unknown); not counted",
				i, w.name, b.Name, checkTimeout, hist.Len(), hist.Unknown())
		}
		if w.check != nil {
			if err := w.check(hist); err != nil {
				s.violations++
				t.Errorf("history %d of %s on %s: %v", i, w.name, b.Name, err)
			}
		}
	}
	for _, p := range r.proxies {
		st := p.Stats()
		s.dropped += st.DroppedReplies
		s.replaced += st.ReplacedReplies
		s.injected += st.InjectedErrors
		s.delayed += st.DelayedReplies
	}
	s.cuts, s.kills = int(r.cuts.Load()), int(r.kills.Load())
	s.took = time.Since(start)
	return s
}

// runHistory runs one history of w on key and returns how many faults
// fired during it, when commands may have been re-sent, and the history.
// It deletes the keys that outlive the history unless keep is set.
func runHistory(t testing.TB, r *rig, w workload, coords []*coordination.Coordinator, key string, rng *rand.Rand, keep bool) (int, []time.Time, *lincheck.History) {
	hist := lincheck.New()
	f := r.inject(rng)
	var ids atomic.Int64
	var wg sync.WaitGroup
	for c := range w.clients {
		hc := &hctx{t: t, h: hist, c: c, coord: coords[c], key: key, rng: rand.New(rand.NewPCG(rng.Uint64(), uint64(c))), ids: &ids}
		wg.Go(func() { w.run(hc) })
	}
	wg.Wait()
	fired, resent := f.end()
	if w.keys != nil && !keep {
		for _, k := range w.keys(key) {
			if err := r.raw.Del(context.Background(), r.prefix+k).Err(); err != nil {
				t.Errorf("DEL: %v", err)
			}
		}
	}
	return fired, resent, hist
}
