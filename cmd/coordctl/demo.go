package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/cliconn"
)

// scenario is one part of `coordctl demo`. Scenarios run in order; each
// prints its timeline and checks its own invariants.
type scenario struct {
	order int    // position in the demo
	name  string // --only NAME
	title string
	run   func(ctx context.Context, d *demo) error
}

var scenarios []scenario

func addScenario(s scenario) { scenarios = append(scenarios, s) }

// demo is what a scenario gets: a coordinator factory (one per simulated
// process), the timeline and the invariant checker.
type demo struct {
	coord  func() *coordination.Coordinator
	out    io.Writer
	start  time.Time
	mu     sync.Mutex
	failed []string
	passed int
	late   []string // held, but later than the bound a quiet machine keeps
	prefix string
	coords []*coordination.Coordinator // every one d.coord made (under mu)
}

// logf prints one timeline line: elapsed time, actor, message.
func (d *demo) logf(actor, format string, args ...any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	fmt.Fprintf(d.out, "  %7.1fms  %-10s %s\n", float64(time.Since(d.start).Microseconds())/1000, actor, fmt.Sprintf(format, args...))
}

// check records an invariant; a false ok fails the demo (exit 1).
func (d *demo) check(name string, ok bool, detailFormat string, args ...any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	mark := "ok  "
	if ok {
		d.passed++
	} else {
		mark = "FAIL"
		d.failed = append(d.failed, name)
	}
	fmt.Fprintf(d.out, "  [%s] %s: %s\n", mark, name, fmt.Sprintf(detailFormat, args...))
}

// timed records a check whose outcome (ok) is an invariant and whose
// timing (inTime: within the bound the detail states) is what an unloaded
// machine shows: a late one is marked [slow] and listed in the summary,
// never counted as failed (a loaded machine delays any process; the
// invariant is what the library promises).
func (d *demo) timed(name string, ok, inTime bool, detailFormat string, args ...any) {
	if !ok || inTime {
		d.check(name, ok, detailFormat, args...)
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.passed++
	d.late = append(d.late, name)
	fmt.Fprintf(d.out, "  [slow] %s: %s\n", name, fmt.Sprintf(detailFormat, args...))
}

func init() {
	register(command{
		name:  "demo",
		usage: "demo [NAME...] [--redis URL]                             run the self-checking scenarios (embedded miniredis by default)",
		run:   runDemo,
	})
}

func runDemo(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("demo", stdout, stderr, `usage: coordctl demo [NAME...] [--only NAME,...] [--list] [--redis URL | --cluster ADDRS | --sentinel M@ADDRS]

Runs self-checking scenarios that show each primitive at work (two or more
simulated processes on one server), checks their invariants, and removes its
keys afterwards. Without a server it runs on an embedded miniredis. NAME (or
--only) picks scenarios; --list lists them. Exit status: 0 when every invariant
held, 1 when one failed, 2 on bad usage (an unknown scenario too), 3 when the
server cannot be reached.`, `coordctl demo
coordctl demo leader fencing --redis redis://127.0.0.1:6379/0
coordctl demo --cluster 127.0.0.1:7000,127.0.0.1:7001 --only semaphore`)
	only := fs.String("only", "", "comma-separated scenario names to run (default: all), as the NAME arguments")
	list := fs.Bool("list", false, "list the scenarios and exit")
	if code, ok := fs.parse(args); !ok {
		return code
	}
	cf := fs.cf
	sort.SliceStable(scenarios, func(i, j int) bool { return scenarios[i].order < scenarios[j].order })
	if *list {
		for _, s := range scenarios {
			fmt.Fprintf(stdout, "%-12s %s\n", s.name, s.title)
		}
		return exitOK
	}
	var names []string
	if *only != "" {
		names = strings.Split(*only, ",")
	}
	names = append(names, fs.Args()...)
	for _, n := range names {
		if !slices.ContainsFunc(scenarios, func(s scenario) bool { return s.name == n }) {
			return fs.usagef("no scenario %q; the scenarios are %s", cliconn.RedactArg(n), strings.Join(scenarioNames(), ", "))
		}
	}
	var selected []scenario
	for _, s := range scenarios {
		if len(names) == 0 || slices.Contains(names, s.name) {
			selected = append(selected, s)
		}
	}
	client, desc, stop, err := cf.connect(true)
	if err != nil {
		return fail(stderr, "demo", err)
	}
	defer stop()
	fmt.Fprintf(stdout, "coordctl demo on %s\n", desc)

	// Each run uses fresh keys so that it never meets an earlier run's state.
	runID := fmt.Sprintf("%x", time.Now().UnixNano())
	prefix := cf.prefix + "coordctl-demo:" + runID + ":"
	d := &demo{out: stdout, prefix: prefix}
	d.coord = func() *coordination.Coordinator {
		c, err := coordination.New(client, coordination.WithKeyPrefix(prefix))
		if err != nil {
			panic(err) // client is non-nil and the options are valid
		}
		d.mu.Lock()
		d.coords = append(d.coords, c)
		d.mu.Unlock()
		return c
	}
	// Ctrl-C (or SIGTERM) stops the scenario under way; the demo's keys
	// are removed all the same, on a context of their own.
	ctx, stopSignals := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stopSignals()
	for _, s := range selected {
		fmt.Fprintf(stdout, "\n== %s ==\n", s.title)
		d.start = time.Now()
		if err := s.run(ctx, d); err != nil && ctx.Err() == nil {
			d.check(s.name+" ran", false, "%v", err)
		}
		if ctx.Err() != nil {
			break
		}
	}
	interrupted := ctx.Err() != nil
	stopSignals() // a second Ctrl-C now ends the process at once
	cleanCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Every coordinator ends first, so that no background cleanup (the
	// undo of an acquisition the interruption left ambiguous, which may
	// leave a tombstone) writes after the keys are removed.
	d.mu.Lock()
	coords := d.coords
	d.mu.Unlock()
	for _, c := range coords {
		_ = c.Shutdown(cleanCtx)
	}
	if n, err := removeKeys(cleanCtx, client, prefix); err != nil {
		fmt.Fprintf(stderr, "coordctl demo: could not remove the demo's keys (prefix %q): %v\n", prefix, err)
	} else if cf.Given() {
		fmt.Fprintf(stdout, "\nremoved the demo's %d keys from the server\n", n)
	}
	if interrupted {
		fmt.Fprintln(stderr, "coordctl demo: interrupted")
		return 130
	}
	fmt.Fprintf(stdout, "\n%d invariants held, %d failed\n", d.passed, len(d.failed))
	if len(d.late) > 0 {
		fmt.Fprintf(stdout, "held later than on an unloaded machine (is it busy?): %s\n", strings.Join(d.late, ", "))
	}
	if len(d.failed) > 0 {
		fmt.Fprintf(stdout, "FAILED: %s\n", strings.Join(d.failed, ", "))
		return exitRefused
	}
	return exitOK
}

// scenarioNames returns the scenarios' names in order.
func scenarioNames() []string {
	var n []string
	for _, s := range scenarios {
		n = append(n, s.name)
	}
	return n
}

// removeKeys deletes every key under prefix (SCAN, then UNLINK in batches;
// on a cluster, on every primary), so that demo runs leave nothing behind on
// a real server. It returns how many keys it removed.
func removeKeys(ctx context.Context, c redis.UniversalClient, prefix string) (int, error) {
	var total atomic.Int64
	pattern := escapeGlob(prefix) + "*"
	scan := func(ctx context.Context, n redis.UniversalClient) error {
		iter := n.Scan(ctx, 0, pattern, 500).Iterator()
		var batch []string
		flush := func() error {
			if len(batch) == 0 {
				return nil
			}
			for _, k := range batch { // one key per call: cluster keys may be in any slot
				if err := c.Unlink(ctx, k).Err(); err != nil {
					return err
				}
			}
			total.Add(int64(len(batch)))
			batch = batch[:0]
			return nil
		}
		for iter.Next(ctx) {
			batch = append(batch, iter.Val())
			if len(batch) == 500 {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		if err := iter.Err(); err != nil {
			return err
		}
		return flush()
	}
	if cc, ok := c.(*redis.ClusterClient); ok {
		err := cc.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error { return scan(ctx, n) })
		return int(total.Load()), err
	}
	err := scan(ctx, c)
	return int(total.Load()), err
}

// escapeGlob escapes the glob metacharacters of SCAN MATCH.
func escapeGlob(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '*', '?', '[', ']', '\\':
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
