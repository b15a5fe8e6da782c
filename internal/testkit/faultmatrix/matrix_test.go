package faultmatrix_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/testkit/faultproxy"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// fault is one row of the matrix: it runs a subject's take under the fault
// on a fresh world and asserts the effect effect() names.
type fault struct {
	id, title string
	run       func(t *testing.T, w *world, s subject)
	effect    func(s subject) string
}

// cell is the context every take gets: long enough for any fault,
// cancelled when the cell ends (it also ends the leader's Run).
func cellContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// clean runs the take and checks the answer and the count: one effect.
func clean(t *testing.T, ctx context.Context, w *world, s subject, what string) {
	t.Helper()
	got, err := s.take(ctx, w)
	if err != nil || got != s.want {
		t.Fatalf("%s: take = %q, %v; want %q", what, got, err, s.want)
	}
	wantCount(t, w, s, s.fullCount(), what)
}

func wantCount(t *testing.T, w *world, s subject, want int, what string) {
	t.Helper()
	testharness.WaitFor(t, 5*time.Second, what, func() string {
		n, err := s.count(context.Background(), w)
		if err != nil || n != want {
			return fmt.Sprintf("count %d (%v), want %d", n, err, want)
		}
		return ""
	})
}

// byKind is the effect text of a fault with one text for Redlock (the
// fault hits one node of three) and one for every other primitive.
func byKind(quorum, other string) func(subject) string {
	return func(s subject) string {
		if s.kind == quorumKind {
			return quorum
		}
		return other
	}
}

var faults = []fault{
	{
		id: "cut", title: "connection cut mid-command",
		run: func(t *testing.T, w *world, s subject) {
			ctx := cellContext(t)
			rule := w.px[0].Apply(faultproxy.DelayCommand(faultproxy.Arg(s.key), 5*time.Second, 1))
			type result struct {
				got string
				err error
			}
			done := make(chan result, 1)
			go func() {
				got, err := s.take(ctx, w)
				done <- result{got, err}
			}()
			var r result
			select {
			case <-rule.Done():
			case r = <-done:
				if s.kind != quorumKind { // a group may answer at quorum first
					t.Fatalf("take returned %q, %v before its command was held", r.got, r.err)
				}
				<-rule.Done()
			}
			time.Sleep(20 * time.Millisecond)
			w.px[0].CutAll(faultproxy.RST) // the held command never reaches the server
			if r == (result{}) {
				r = <-done
			}
			if s.once {
				// Written, so never re-sent: the caller cannot know
				// whether it ran (here it did not).
				if r.err == nil || !coordination.IsAmbiguous(r.err) {
					t.Fatalf("take through the cut = %q, %v; want an ambiguous error", r.got, r.err)
				}
				wantCount(t, w, s, 0, "after the cut (the held command never ran)")
				return
			}
			if r.err != nil || r.got != s.want {
				t.Fatalf("take through the cut = %q, %v; want %q", r.got, r.err, s.want)
			}
			wantCount(t, w, s, s.fullCount(), "after the cut")
		},
		effect: func(s subject) string {
			switch {
			case s.kind == quorumKind:
				return "quorum; the cut node re-sends"
			case s.once:
				return "not re-sent: ambiguous error"
			}
			return "re-sent: one effect"
		},
	},
	{
		id: "deadline", title: "reply delayed past the deadline",
		run: func(t *testing.T, w *world, s subject) {
			// A 1 s deadline: on a loaded machine a 300 ms one could end
			// before the command was written (the rule then never fired).
			rule := w.px[0].Apply(faultproxy.DelayReply(faultproxy.Arg(s.key), 3*time.Second, 1))
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			got, err := s.take(ctx, w)
			if s.kind == quorumKind {
				<-rule.Done() // a group may answer at quorum first
			}
			if rule.Fired() != 1 {
				t.Fatalf("the delay rule fired %d times", rule.Fired())
			}
			if s.kind == quorumKind {
				if err != nil || got != s.want {
					t.Fatalf("take with one node late = %q, %v; want %q", got, err, s.want)
				}
				// The late node ran the acquisition too: its lease is the
				// holder's (same token), released with the lock.
				wantCount(t, w, s, 3, "the late node's lease")
				return
			}
			if err == nil {
				t.Fatalf("take past its deadline = %q, nil; want the deadline's error", got)
			}
			if !errors.Is(err, context.DeadlineExceeded) || !coordination.IsAmbiguous(err) {
				t.Fatalf("take past its deadline: %v (ambiguous %v), want DeadlineExceeded, ambiguous", err, coordination.IsAmbiguous(err))
			}
			if s.kind == consumeKind {
				wantCount(t, w, s, 1, "the late command counted")
			} else {
				wantCount(t, w, s, 0, "what the late command took undone")
			}
		},
		effect: func(s subject) string {
			switch s.kind {
			case consumeKind:
				return "ambiguous error; counted"
			case electionKind:
				return "Run ends; the lease undone"
			case quorumKind:
				return "quorum of the others; the late node's lease is the holder's"
			}
			return "ambiguous error; undone in the background"
		},
	},
	{
		id: "lost", title: "reply lost, re-sent by go-redis",
		run: func(t *testing.T, w *world, s subject) {
			ctx := cellContext(t)
			rule := w.px[0].Apply(faultproxy.DropReply(faultproxy.Arg(s.key), 1))
			if s.once {
				got, err := s.take(ctx, w)
				if err == nil || !coordination.IsAmbiguous(err) {
					t.Fatalf("take with its reply lost = %q, %v; want an ambiguous error", got, err)
				}
				wantCount(t, w, s, s.fullCount(), "after the lost reply (counted once)")
			} else {
				clean(t, ctx, w, s, "after the lost reply")
			}
			if rule.Fired() != 1 {
				t.Fatalf("the drop rule fired %d times", rule.Fired())
			}
		},
		effect: func(s subject) string {
			switch {
			case s.kind == quorumKind:
				return "quorum; the node's re-send finds its lease"
			case s.once:
				return "not re-sent: ambiguous error; counted once"
			}
			return "re-sent: one effect, same answer"
		},
	},
	{
		id: "restart", title: "server restart (state lost)",
		run: func(t *testing.T, w *world, s subject) {
			ctx := cellContext(t)
			clean(t, ctx, w, s, "before the restart")
			w.srv[0].Stop()
			if err := w.srv[0].Restart(); err != nil {
				t.Fatal(err)
			}
			lost := map[string]bool{}
			for _, k := range s.keys {
				lost[k] = true
			}
			s.forgotten(t, w, lost)
		},
		effect: func(s subject) string { return s.restart },
	},
	{
		id: "flush", title: "SCRIPT FLUSH",
		run: func(t *testing.T, w *world, s subject) {
			ctx := cellContext(t)
			for _, a := range w.admin {
				must(a.ScriptFlush(ctx).Result())(t)
			}
			clean(t, ctx, w, s, "after SCRIPT FLUSH")
		},
		effect: func(subject) string { return "reloaded (EVAL): one effect" },
	},
	{
		id: "pause", title: "CLIENT PAUSE WRITE",
		run: func(t *testing.T, w *world, s subject) {
			ctx := cellContext(t)
			must(w.admin[0].Do(ctx, "CLIENT", "PAUSE", 400, "WRITE").Result())(t)
			start := time.Now()
			got, err := s.take(ctx, w)
			took := time.Since(start)
			if err != nil || got != s.want {
				t.Fatalf("take under CLIENT PAUSE = %q, %v; want %q", got, err, s.want)
			}
			if s.kind != quorumKind && took < 300*time.Millisecond {
				t.Errorf("take under a 400ms CLIENT PAUSE returned after %v", took)
			}
			wantCount(t, w, s, s.fullCount(), "after the pause")
		},
		effect: byKind("quorum at once; the paused node follows", "waits for the pause: one effect"),
	},
	{
		id: "oom", title: "maxmemory, noeviction",
		run: func(t *testing.T, w *world, s subject) {
			ctx := cellContext(t)
			a := w.admin[0]
			must(a.ConfigSet(ctx, "maxmemory-policy", "noeviction").Result())(t)
			must(a.ConfigSet(ctx, "maxmemory", "1").Result())(t)
			before := snapshot(t, a)
			got, err := s.take(ctx, w)
			if s.kind == quorumKind {
				// The group returns at quorum: wait for the refusal of the
				// node out of memory before looking at it.
				testharness.WaitFor(t, 5*time.Second, "the OOM refusal", func() string {
					if !strings.Contains(must(a.Info(ctx, "errorstats").Result())(t), "errorstat_OOM") {
						return "no OOM error reply yet"
					}
					return ""
				})
			}
			after := snapshot(t, a)
			must(a.ConfigSet(ctx, "maxmemory", "0").Result())(t)
			switch {
			case s.kind == quorumKind:
				if err != nil || got != s.want {
					t.Fatalf("take with one node out of memory = %q, %v; want %q", got, err, s.want)
				}
				if !maps.Equal(before, after) {
					t.Errorf("the node out of memory changed: %v -> %v", before, after)
				}
				wantCount(t, w, s, 2, "the others hold it")
			case s.oomGranted:
				if err != nil || got != s.want {
					t.Fatalf("take under OOM = %q, %v; want %q (its first write frees memory)", got, err, s.want)
				}
				wantCount(t, w, s, 1, "granted under OOM")
			default:
				if err == nil || !strings.Contains(err.Error(), "OOM") || engine.Classify(err) != engine.Terminal ||
					coordination.IsAmbiguous(err) {
					t.Fatalf("take under OOM = %q, %v; want a terminal OOM error", got, err)
				}
				if !maps.Equal(before, after) {
					t.Errorf("a take refused with OOM wrote: %v -> %v", before, after)
				}
			}
		},
		effect: func(s subject) string {
			switch {
			case s.kind == quorumKind:
				return "quorum of the others"
			case s.oomGranted:
				return "granted (its first write frees memory)"
			}
			return "OOM error (terminal), nothing written"
		},
	},
	{
		id: "evict", title: "eviction (volatile-*)",
		run: func(t *testing.T, w *world, s subject) {
			ctx := cellContext(t)
			clean(t, ctx, w, s, "before the eviction")
			kept := evictVolatile(t, w.admin[0], s.keys)
			lost := map[string]bool{}
			for _, k := range s.keys {
				lost[k] = !strings.Contains(strings.Join(kept, "\x00"), k)
			}
			s.forgotten(t, w, lost)
		},
		effect: func(s subject) string { return s.evict },
	},
}

// TestFaultMatrix runs every fault on every primitive, each cell on fresh
// dedicated servers. The cells mostly wait (for a pause, a deadline, a
// cleanup), so they run 8 at a time whatever go test's -parallel: t.Run
// may be called from several goroutines at once.
func TestFaultMatrix(t *testing.T) {
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for _, flavor := range flavors(t) {
		for _, f := range faults {
			for _, s := range subjects() {
				if s.hft && !hasHashFieldTTL(flavor) {
					continue
				}
				wg.Add(1)
				sem <- struct{}{}
				go func() {
					defer func() { <-sem; wg.Done() }()
					t.Run(flavor+"/"+f.id+"/"+s.name, func(t *testing.T) {
						w := newWorld(t, flavor, s.nodeCount())
						if s.setup != nil {
							if err := s.setup(context.Background(), w); err != nil {
								t.Fatalf("setup: %v", err)
							}
						}
						f.run(t, w, s)
					})
				}()
			}
		}
	}
	wg.Wait()
}

func hasHashFieldTTL(flavor string) bool { return flavor == "redis8" || flavor == "valkey9" }
