package leader_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/fencingcore"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/leader"
)

func TestMain(m *testing.M) { testharness.Main(m) }

const (
	leaseKey = "{election}:lease"
	fenceKey = "{election}:fence"
)

func must[T any](v T, err error) func(testing.TB) T {
	return func(t testing.TB) T {
		t.Helper()
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return v
	}
}

// termRec is what the test saw of one term.
type termRec struct {
	id         string
	token      int64
	start      time.Time // OnElected began
	believed   time.Time // the term's context was seen cancelled (end of belief)
	electedEnd time.Time // OnElected returned
	revokedEnd time.Time // OnRevoked returned
	revokes    int       // OnRevoked calls
	term       *leader.Term
	cause      error
}

// journal records every term of a set of electors and reports elections.
type journal struct {
	mu      sync.Mutex
	terms   []*termRec
	byTerm  map[*leader.Term]*termRec
	elected chan *termRec
	active  map[string]int // callbacks running per identity
	errs    []string
}

func newJournal() *journal {
	return &journal{byTerm: map[*leader.Term]*termRec{}, elected: make(chan *termRec, 4096), active: map[string]int{}}
}

func (j *journal) failf(format string, args ...any) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.errs = append(j.errs, fmt.Sprintf(format, args...))
}

func (j *journal) onElected(ctx context.Context, term *leader.Term) *termRec {
	r := &termRec{id: term.Identity(), token: term.FencingToken(), start: time.Now(), term: term}
	j.mu.Lock()
	j.terms = append(j.terms, r)
	j.byTerm[term] = r
	j.active[r.id]++
	j.mu.Unlock()
	go func() {
		<-ctx.Done()
		j.mu.Lock()
		if r.believed.IsZero() {
			r.believed = beliefEnd(ctx)
		}
		j.mu.Unlock()
	}()
	j.elected <- r
	return r
}

// beliefEnd is when a term whose context is done stopped believing it
// led: now, or the context's deadline (the lease's local deadline) when
// that came first; a holder that bounds its work by the deadline stops
// there even when the goroutine watching ctx.Done runs late on a loaded
// machine.
func beliefEnd(ctx context.Context) time.Time {
	now := time.Now()
	if dl, ok := ctx.Deadline(); ok && dl.Before(now) {
		return dl
	}
	return now
}

func (j *journal) electedReturned(r *termRec) {
	j.mu.Lock()
	r.electedEnd = time.Now()
	j.active[r.id]--
	j.mu.Unlock()
}

func (j *journal) onRevoked(term *leader.Term) {
	if term.Context().Err() == nil {
		j.failf("OnRevoked of token %d ran before its context was cancelled", term.FencingToken())
	}
	// OnRevoked may run as soon as OnElected was called, before its first
	// statement recorded the term.
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		j.mu.Lock()
		seen := j.byTerm[term] != nil
		j.mu.Unlock()
		if seen {
			break
		}
	}
	j.mu.Lock()
	j.active[term.Identity()]++
	r := j.byTerm[term]
	if r != nil && r.believed.IsZero() {
		// The context is cancelled (checked above) and the lease is not
		// released yet: the end of belief is no later than now, even when
		// the goroutine that waits for ctx.Done has not run yet (a loaded
		// machine).
		r.believed = beliefEnd(term.Context())
	}
	j.mu.Unlock()
	if r == nil {
		j.failf("OnRevoked for a term OnElected never saw (token %d)", term.FencingToken())
		return
	}
	time.Sleep(time.Millisecond) // give an overlapping campaign a chance to show up
	j.mu.Lock()
	r.revokes++
	r.cause = context.Cause(term.Context())
	r.revokedEnd = time.Now()
	j.active[term.Identity()]--
	j.mu.Unlock()
}

// busy reports whether a callback of identity is running.
func (j *journal) busy(id string) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.active[id] > 0
}

func (j *journal) snapshot() []termRec {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := make([]termRec, len(j.terms))
	for i, r := range j.terms {
		out[i] = *r
	}
	return out
}

// latest is the last term elected so far.
func (j *journal) latest() *termRec {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.terms[len(j.terms)-1]
}

// successor waits for the first term elected after cur of another
// identity.
func (j *journal) successor(t *testing.T, cur *termRec, within time.Duration) *termRec {
	t.Helper()
	var next *termRec
	waitFor(t, within, "a successor of "+cur.id, func() bool {
		j.mu.Lock()
		defer j.mu.Unlock()
		for i := len(j.terms) - 1; i >= 0 && j.terms[i] != cur; i-- {
			if j.terms[i].id != cur.id {
				next = j.terms[i]
			}
		}
		return next != nil
	})
	return next
}

// next waits for the next election.
func (j *journal) next(t testing.TB, within time.Duration) *termRec {
	t.Helper()
	select {
	case r := <-j.elected:
		return r
	case <-time.After(within):
		t.Fatalf("no election within %v", within)
		return nil
	}
}

// check verifies the invariants every test wants: OnRevoked exactly once
// per ended term, local terms of one identity never overlapping (the next
// term starts after both callbacks of the previous one returned), and
// tokens strictly increasing in election order.
func (j *journal) check(t *testing.T) {
	t.Helper()
	j.mu.Lock()
	errs := append([]string(nil), j.errs...)
	j.mu.Unlock()
	for _, e := range errs {
		t.Error(e)
	}
	terms := j.snapshot()
	sort.Slice(terms, func(a, b int) bool { return terms[a].start.Before(terms[b].start) })
	last := map[string]termRec{}
	seen := map[int64]string{}
	var highest int64
	for _, r := range terms {
		if r.revokes != 1 {
			t.Errorf("term %d (%s): OnRevoked ran %d times, want 1", r.token, r.id, r.revokes)
		}
		if id, dup := seen[r.token]; dup {
			t.Errorf("token %d handed to two terms (%s and %s)", r.token, id, r.id)
		}
		seen[r.token] = r.id
		// Tokens increase in the order the server granted the terms; the
		// order in which their OnElected began follows it, except for a
		// term whose callback started late (a loaded machine) after its
		// lease was already gone and won again by another: it began after
		// a higher token's term and ended lost.
		if r.token < highest && !errors.Is(r.cause, coordination.ErrLost) {
			t.Errorf("tokens not increasing in election order: %d then %d, and term %d was not lost", highest, r.token, r.token)
		}
		highest = max(highest, r.token)
		if p, ok := last[r.id]; ok {
			if !r.start.After(p.electedEnd) || !r.start.After(p.revokedEnd) {
				t.Errorf("%s: term %d started before the callbacks of term %d returned", r.id, r.token, p.token)
			}
		}
		last[r.id] = r
	}
}

// contender is one elector running in the background.
type contender struct {
	id     string
	e      *leader.Elector
	resign chan struct{}
	cancel context.CancelFunc
	done   chan error
}

func startContender(t testing.TB, coord *coordination.Coordinator, id string, j *journal, opts ...leader.Option) *contender {
	t.Helper()
	c := &contender{id: id, resign: make(chan struct{}, 1), done: make(chan error, 1)}
	opts = append([]leader.Option{
		leader.OnElected(func(ctx context.Context, term *leader.Term) error {
			r := j.onElected(ctx, term)
			defer j.electedReturned(r)
			select {
			case <-ctx.Done():
			case <-c.resign:
			}
			return nil
		}),
		leader.OnRevoked(func(term *leader.Term) error {
			j.onRevoked(term)
			return nil
		}),
	}, opts...)
	c.e = must(leader.New(coord, leaseKey, fenceKey, id, opts...))(t)
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	go func() { c.done <- c.e.Run(ctx) }()
	t.Cleanup(func() { c.stop(t) })
	return c
}

// stop cancels Run and waits for it; it returns Run's error.
func (c *contender) stop(t testing.TB) error {
	t.Helper()
	c.cancel()
	select {
	case err, ok := <-c.done:
		if ok {
			close(c.done)
		}
		return err
	case <-time.After(20 * time.Second):
		t.Fatalf("%s: Run did not return after cancel", c.id)
		return nil
	}
}

// meter returns a coordinator option with an SDK meter provider and its
// reader.
func meter() (coordination.Option, *sdkmetric.ManualReader) {
	r := sdkmetric.NewManualReader()
	return coordination.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))), r
}

// counterPoints returns the data points of an int64 counter by attribute
// set ("" for none, else "k=v,...").
func counterPoints(t *testing.T, r *sdkmetric.ManualReader, name string) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			sum, ok := m.Data.(metricdata.Sum[int64])
			if !ok {
				t.Fatalf("%s is %T, want an int64 sum", name, m.Data)
			}
			for _, p := range sum.DataPoints {
				key := ""
				for i, kv := range p.Attributes.ToSlice() {
					if i > 0 {
						key += ","
					}
					key += string(kv.Key) + "=" + kv.Value.Emit()
				}
				out[key] += p.Value
			}
		}
	}
	return out
}

// failingHook makes every command of a client fail with err while on.
type failingHook struct {
	on    atomic.Bool
	err   error
	count atomic.Int64 // commands failed
	only  string       // fail only script calls of this script's SHA; "" = all commands
	left  atomic.Int64 // when > 0, fail only this many more commands, then switch off
}

func (h *failingHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *failingHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.on.Load() && (h.only == "" || isScript(cmd, h.only)) {
			if h.left.Load() > 0 && h.left.Add(-1) == 0 {
				h.on.Store(false)
			}
			h.count.Add(1)
			cmd.SetErr(h.err)
			return h.err
		}
		return next(ctx, cmd)
	}
}
func (h *failingHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if h.on.Load() {
			for _, c := range cmds {
				c.SetErr(h.err)
			}
			return h.err
		}
		return next(ctx, cmds)
	}
}

// redisErr is a server error reply (it implements redis.Error).
type redisErr string

func (e redisErr) Error() string { return string(e) }
func (redisErr) RedisError()     {}

var _ redis.Error = redisErr("")

// errCutOff simulates a process cut off from Redis ("crashed" for the
// others): a transient reply, so the elector keeps retrying, but not an
// ambiguous one, so no background cleanup outlives the test (a real crash
// ends those with the process).
const errCutOff = redisErr("TRYAGAIN injected: the process is cut off from Redis")

// netErr is a network timeout (transient, ambiguous).
type netErr struct{}

func (netErr) Error() string   { return "i/o timeout (injected: the process is cut off)" }
func (netErr) Timeout() bool   { return true }
func (netErr) Temporary() bool { return true }

// coordWith returns a coordinator over a new client of b with hooks added
// to the client and the test's prefix.
func coordWith(t testing.TB, b *testharness.Backend, hs []redis.Hook, opts ...coordination.Option) *coordination.Coordinator {
	t.Helper()
	c := b.Client(t)
	for _, h := range hs {
		c.AddHook(h)
	}
	return must(coordination.New(c, append([]coordination.Option{coordination.WithKeyPrefix(b.Prefix())}, opts...)...))(t)
}

func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func isErr(err, target error) bool { return errors.Is(err, target) }

// isScript reports whether cmd runs the script with that SHA1.
func isScript(cmd redis.Cmder, sha string) bool {
	args := cmd.Args()
	return len(args) > 1 && cmd.Name() == "evalsha" && fmt.Sprint(args[1]) == sha // the engine sends the SHA as a fmt.Stringer
}

// counterOf reads the fence counter whose full (prefixed) counter key is
// fk, under the key prefix prefix: a field of its slot's shared counter
// hash (the layout of issue 24; before, a string at fk).
func counterOf(ctx context.Context, c redis.Cmdable, prefix, fk string) *redis.StringCmd {
	return c.HGet(ctx, fencingcore.SharedKeyOf(prefix, fk), fk)
}
