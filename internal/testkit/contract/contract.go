// Package contract is the test suite every primitive runs, so that no
// primitive can skip a rule of the house: key prefix and binary keys, one
// command per hot-path operation, bad input sends nothing and admits
// nothing, every public operation is admitted through hooks exactly once
// with the right outcome, a hook's rejection sends nothing, operations
// survive SCRIPT FLUSH, a lost reply leaves nothing behind, and every
// instrument recorded is one of the engine's table with attributes that
// never carry a key.
//
// A primitive plugs in with a [Spec]: a scenario of [Step]s on an object
// named by the suite (the primitive derives its keys from the name, keeping
// the name's {hash tag}), its bad inputs, and, where it has one, the
// operation whose lost reply must be cleaned up:
//
//	func TestContract(t *testing.T) {
//		contract.Run(t, contract.Spec{Primitive: "lock", Scenario: ..., Keys: ...})
//	}
package contract

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/instrument"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// operationDuration is the engine's histogram of every operation
// (docs/metrics.md).
const operationDuration = "coordination.operation.duration"

// Spec describes a primitive to the suite.
type Spec struct {
	// Primitive is the hooks primitive kind, e.g. "lock".
	Primitive string
	// Scenario returns fresh steps (with fresh state) of one use of the
	// primitive on the object named name. The first step creates what
	// [Spec.Keys] names.
	Scenario func(name string) []Step
	// Keys returns the unprefixed keys that exist after the scenario's
	// first step.
	Keys func(name string) []string
	// BadInputs are invalid calls: each must fail with ErrInvalidArgument
	// naming its argument, admit nothing and send nothing.
	BadInputs []BadInput
	// LostReply is an operation whose lost reply must leave nothing behind.
	// A primitive with no such operation leaves it nil and says why in
	// NoLostReply instead (one of the two is required).
	LostReply *LostReply
	// NoLostReply says why nothing a lost reply leaves behind needs undoing
	// (for a consumptive decision, a latch count-down).
	NoLostReply string
	// Metrics are instrument names the scenario records on every backend;
	// each must be in the engine's table.
	Metrics []string
	// Backends restricts the backends (testharness options).
	Backends []testharness.Option
}

// Step is one public operation of a scenario.
type Step struct {
	// Name describes the step in failure messages.
	Name string
	// Op is the hook operation the step admits, exactly once.
	Op string
	// Outcome is the outcome hooks learn; zero means Succeeded.
	Outcome hooks.Outcome
	// OneCommand marks a hot-path step: once the scripts are cached it
	// sends exactly one command, an EVALSHA (or Command).
	OneCommand bool
	// SentOnce marks a consumptive step whose script is sent at most once
	// (engine.Script.Once: a rate-limit grant): go-redis never re-sends it
	// after it may have run, so ReSentStepReportsFirstOutcome does not
	// double it at the hook level (that would run it twice, a re-send no
	// client makes); the primitive's own tests lose its reply through the
	// fault proxy instead.
	SentOnce bool
	// Command is the one command a OneCommand step sends when it is not a
	// script, in upper case (e.g. "SET" for the lock's first acquisition
	// attempt); empty means EVALSHA.
	Command string
	// Run performs the step and checks its answer; any error fails the
	// test.
	Run func(ctx context.Context, c *coordination.Coordinator) error
}

// BadInput is one invalid call.
type BadInput struct {
	Arg string // the argument the error must name
	// Op is the hooks operation a verb's call is refused as: its error
	// names the operation (and the key, when it has a valid one) before
	// the argument, `coordination: lock acquire "k": invalid argument ttl:
	// ...`. Empty for a constructor, whose error names the argument only,
	// `coordination: invalid argument key: ...`.
	Op   string
	Call func(ctx context.Context, c *coordination.Coordinator) error
}

// LostReply is an operation whose reply is lost on its way back (it ran on
// the server; the caller sees an ambiguous error).
type LostReply struct {
	// Setup runs first, with the reply delivered (may be nil).
	Setup func(ctx context.Context, c *coordination.Coordinator, name string) error
	// Op runs with its reply lost; it must return an ambiguous error.
	Op func(ctx context.Context, c *coordination.Coordinator, name string) error
	// Clean reports whether what Op left behind is gone (raw is a client
	// without prefix; key maps an unprefixed key to its full name).
	Clean func(ctx context.Context, raw redis.UniversalClient, key func(string) string, name string) (bool, error)
	// Commands are the lower-case names of plain commands Op may send
	// first instead of a script (e.g. "set"), whose reply is lost too.
	Commands []string
}

// Run runs the suite for s on every backend.
func Run(t *testing.T, s Spec) {
	t.Helper()
	if (s.LostReply == nil) == (s.NoLostReply == "") {
		t.Fatal("contract: give exactly one of Spec.LostReply and Spec.NoLostReply")
	}
	for _, c := range []struct {
		name string
		fn   func(*testing.T, *testharness.Backend, Spec)
	}{
		{"Scenario", scenario},
		{"OneCommandPerOperation", oneCommand},
		{"HooksOncePerOperation", hookOutcomes},
		{"HookRejectionSendsNothing", hookRejection},
		{"BadInputSendsNothing", badInput},
		{"PrefixAndBinaryKeys", prefixAndBinary},
		{"ScriptFlush", scriptFlush},
		{"LostReplyCleanedUp", lostReply},
		{"ReSentStepReportsFirstOutcome", reSent},
		{"MetricsFromTheTable", metrics},
	} {
		if c.name == "LostReplyCleanedUp" && s.LostReply == nil {
			continue // Spec.NoLostReply says why
		}
		t.Run("Contract/"+c.name, func(t *testing.T) {
			testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) { c.fn(t, b, s) }, s.Backends...)
		})
	}
}

// name returns an object name with one hash tag, so a primitive's keys
// derived from it share a Cluster slot.
func name(tag, suffix string) string { return "{" + tag + "}:" + suffix }

func coordFor(t *testing.T, b *testharness.Backend, c redis.UniversalClient, opts ...coordination.Option) *coordination.Coordinator {
	t.Helper()
	coord, err := coordination.New(c, append([]coordination.Option{coordination.WithKeyPrefix(b.Prefix())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return coord
}

func runSteps(t *testing.T, ctx context.Context, coord *coordination.Coordinator, steps []Step, before func(i int, st Step)) {
	t.Helper()
	for i, st := range steps {
		if before != nil {
			before(i, st)
		}
		if err := st.Run(ctx, coord); err != nil {
			t.Fatalf("step %d (%s): %v", i+1, st.Name, err)
		}
	}
}

func scenario(t *testing.T, b *testharness.Backend, s Spec) {
	ctx := context.Background()
	runSteps(t, ctx, b.Coordinator(t), s.Scenario(name("sc", "a")), nil)
}

func oneCommand(t *testing.T, b *testharness.Backend, s Spec) {
	ctx := context.Background()
	client := b.Client(t)
	coord := coordFor(t, b, client)
	runSteps(t, ctx, coord, s.Scenario(name("one", "warm")), nil) // cache the scripts on the slot's node
	k := testharness.CountCommands(client)
	steps := s.Scenario(name("one", "counted"))
	e, err := engine.Of(coord)
	if err != nil {
		t.Fatal(err)
	}
	for i, st := range steps {
		// The background work of the step before (a queued waiter that
		// gave up leaves its queue) is not this step's.
		testharness.WaitFor(t, 5*time.Second, "the background cleanups of the step before", func() string {
			if n := e.Cleanups(); n > 0 {
				return fmt.Sprintf("%d running", n)
			}
			return ""
		})
		k.Reset()
		if err := st.Run(ctx, coord); err != nil {
			t.Fatalf("step %d (%s): %v", i+1, st.Name, err)
		}
		if st.OneCommand {
			want := st.Command
			if want == "" {
				want = "EVALSHA"
			}
			if got := k.Names(); !slices.Equal(got, []string{want}) {
				t.Errorf("step %d (%s) sent %v, want one %s", i+1, st.Name, got, want)
			}
		}
	}
}

func hookOutcomes(t *testing.T, b *testharness.Backend, s Spec) {
	ctx := context.Background()
	rec := &testharness.HookRecorder{}
	coord := b.Coordinator(t, coordination.WithHooks(rec))
	steps := s.Scenario(name("hk", "a"))
	var want []string
	for _, st := range steps {
		o := st.Outcome
		if o == 0 {
			o = hooks.Succeeded
		}
		want = append(want, s.Primitive+":"+st.Op+":"+o.String())
	}
	runSteps(t, ctx, coord, steps, nil)
	if got := rec.Ops(); !slices.Equal(got, want) {
		t.Errorf("hooks saw\n  %v\nwant one admission per step\n  %v", got, want)
	}
}

func hookRejection(t *testing.T, b *testharness.Backend, s Spec) {
	ctx := context.Background()
	client := b.Client(t)
	rec := &testharness.HookRecorder{}
	errNo := errors.New("maintenance window")
	rec.Reject(errNo)
	coord := coordFor(t, b, client, coordination.WithHooks(rec))
	k := testharness.CountCommands(client)
	st := s.Scenario(name("rj", "a"))[0]
	if err := st.Run(ctx, coord); !errors.Is(err, errNo) {
		t.Fatalf("%s under a rejecting hook: %v, want the hook's error", st.Name, err)
	}
	if n := k.Count(); n != 0 {
		t.Fatalf("a rejected %s sent %v", st.Name, k.Names())
	}
}

func badInput(t *testing.T, b *testharness.Backend, s Spec) {
	ctx := context.Background()
	client := b.Client(t)
	rec := &testharness.HookRecorder{}
	coord := coordFor(t, b, client, coordination.WithHooks(rec))
	k := testharness.CountCommands(client)
	for _, bi := range s.BadInputs {
		err := bi.Call(ctx, coord)
		if got, ok := check.ArgumentName(err); !errors.Is(err, coordination.ErrInvalidArgument) || !ok || got != bi.Arg {
			t.Errorf("bad %s: got %v, want ErrInvalidArgument naming %q", bi.Arg, err, bi.Arg)
		}
		if err != nil && !namesOp(err.Error(), bi) {
			if bi.Op == "" {
				t.Errorf("bad %s of a constructor: %v, want `coordination: invalid argument %s: ...`", bi.Arg, err, bi.Arg)
			} else {
				t.Errorf("bad %s of %s: %v, want `coordination: %s[ \"KEY\"]: invalid argument %s: ...`", bi.Arg, bi.Op, err, strings.ToLower(bi.Op), bi.Arg)
			}
		}
		if err := bi.Call(ctx, nil); !errors.Is(err, coordination.ErrInvalidArgument) {
			t.Errorf("bad %s with a nil coordinator: %v, want ErrInvalidArgument", bi.Arg, err)
		}
	}
	if n := k.Count(); n != 0 {
		t.Errorf("bad input sent %d commands: %v", n, k.Names())
	}
	if ops := rec.Ops(); len(ops) != 0 {
		t.Errorf("bad input was admitted: %v", ops)
	}
}

// namesOp reports whether msg, the error of the bad input bi, names what
// it must: for a verb (bi.Op set) the operation, then the key (if any),
// then the argument; for a constructor the argument alone.
func namesOp(msg string, bi BadInput) bool {
	arg := "invalid argument " + bi.Arg + ": "
	if bi.Op == "" {
		return strings.HasPrefix(msg, "coordination: "+arg)
	}
	op := "coordination: " + strings.ToLower(bi.Op)
	return strings.HasPrefix(msg, op+": "+arg) || (strings.HasPrefix(msg, op+` "`) && strings.Contains(msg, `": `+arg))
}

func prefixAndBinary(t *testing.T, b *testharness.Backend, s Spec) {
	ctx := context.Background()
	raw := b.Raw(t)
	n := name("bin\x00\xff\n k", "\x01é")
	steps := s.Scenario(n)
	if err := steps[0].Run(ctx, b.Coordinator(t)); err != nil {
		t.Fatalf("%s on a binary name: %v", steps[0].Name, err)
	}
	for _, key := range s.Keys(n) {
		if c, err := raw.Exists(ctx, b.Key(key)).Result(); err != nil || c != 1 {
			t.Errorf("%q is not stored under the prefixed binary key (%v)", key, err)
		}
		if c, err := raw.Exists(ctx, key).Result(); err != nil || c != 0 {
			t.Errorf("%q is stored without the prefix (%v)", key, err)
		}
	}
	// The rest of the scenario works on the binary name too.
	runSteps(t, ctx, b.Coordinator(t), steps[1:], nil)
}

// FlushScripts runs SCRIPT FLUSH on every node (every primary of a cluster).
func FlushScripts(t testing.TB, c redis.UniversalClient) {
	t.Helper()
	ctx := context.Background()
	if cc, ok := c.(*redis.ClusterClient); ok {
		if err := cc.ForEachShard(ctx, func(ctx context.Context, n *redis.Client) error { return n.ScriptFlush(ctx).Err() }); err != nil {
			t.Fatal(err)
		}
		return
	}
	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
}

func scriptFlush(t *testing.T, b *testharness.Backend, s Spec) {
	ctx := context.Background()
	admin := b.Admin(t) // SCRIPT FLUSH is not the library's to send
	runSteps(t, ctx, b.Coordinator(t), s.Scenario(name("fl", "a")), func(int, Step) { FlushScripts(t, admin) })
}

func lostReply(t *testing.T, b *testharness.Backend, s Spec) {
	ctx := context.Background()
	client := b.Client(t)
	d := &testharness.LostReply{Commands: s.LostReply.Commands}
	client.AddHook(d)
	coord := coordFor(t, b, client)
	n := name("lr", "a")
	if s.LostReply.Setup != nil {
		if err := s.LostReply.Setup(ctx, coord, n); err != nil {
			t.Fatal(err)
		}
	}
	d.Arm()
	if err := s.LostReply.Op(ctx, coord, n); err == nil || !coordination.IsAmbiguous(err) {
		t.Fatalf("operation with a lost reply: %v, want an ambiguous error", err)
	}
	raw := b.Raw(t)
	deadline := time.Now().Add(5 * time.Second)
	for {
		clean, err := s.LostReply.Clean(ctx, raw, b.Key, n)
		if err != nil {
			t.Fatal(err)
		}
		if clean {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("what the lost reply left behind was not cleaned up within 5 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// reSent runs the scenario once per step, with that step's first command
// sent twice (go-redis' re-send after a lost reply: the server ran the
// first send, whose reply is thrown away), and requires the step to report
// what it reports without the re-send (its own checks), and the steps
// after it to run as they do without it. A step that sends nothing
// (answered locally) is run as it is.
func reSent(t *testing.T, b *testharness.Backend, s Spec) {
	ctx := context.Background()
	client := b.Client(t)
	hook := &testharness.Resend{}
	client.AddHook(hook)
	coord := coordFor(t, b, client)
	runSteps(t, ctx, coord, s.Scenario(name("rs", "warm")), nil) // cache the scripts on the slot's node
	n := len(s.Scenario(name("rs", "count")))
	for i := range n {
		steps := s.Scenario(name("rs", fmt.Sprint(i)))
		runSteps(t, ctx, coord, steps[:i], nil)
		if steps[i].SentOnce {
			runSteps(t, ctx, coord, steps[i:], nil)
			continue
		}
		hook.Arm()
		if err := steps[i].Run(ctx, coord); err != nil {
			sent, cmd := hook.Sent()
			t.Fatalf("step %d (%s) with its %s re-sent (%d sends): %v", i+1, steps[i].Name, cmd, sent, err)
		}
		if hook.Armed() {
			// nothing sent: answered locally
			if steps[i].OneCommand {
				t.Errorf("step %d (%s) is a OneCommand step but sent nothing", i+1, steps[i].Name)
			}
		}
		hook.Disarm()
		runSteps(t, ctx, coord, steps[i+1:], nil)
	}
}

func metrics(t *testing.T, b *testharness.Backend, s Spec) {
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	coord := b.Coordinator(t, coordination.WithMeterProvider(mp))
	n := name("mt", "secret-key-name")
	runSteps(t, ctx, coord, s.Scenario(n), nil)
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	table := map[string]bool{}
	for _, m := range instrument.Table {
		table[m.Name] = true
	}
	seen := map[string]bool{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			seen[m.Name] = true
			if !table[m.Name] {
				t.Errorf("instrument %s is not in the engine's table", m.Name)
			}
			for _, set := range attributeSets(m.Data) {
				for _, kv := range set.ToSlice() {
					if v := kv.Value.Emit(); strings.Contains(v, "secret-key-name") || strings.Contains(v, b.Prefix()) {
						t.Errorf("instrument %s carries a key in attribute %s", m.Name, kv.Key)
					}
				}
			}
		}
	}
	for _, want := range s.Metrics {
		if !table[want] {
			t.Errorf("Spec.Metrics names %s, which is not in the engine's table", want)
		}
		if !seen[want] {
			t.Errorf("instrument %s was not recorded (seen: %v)", want, keys(seen))
		}
	}
	if !seen[operationDuration] {
		t.Errorf("%s was not recorded", operationDuration)
	}
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func attributeSets(d metricdata.Aggregation) []attribute.Set {
	var out []attribute.Set
	switch v := d.(type) {
	case metricdata.Sum[int64]:
		for _, p := range v.DataPoints {
			out = append(out, p.Attributes)
		}
	case metricdata.Sum[float64]:
		for _, p := range v.DataPoints {
			out = append(out, p.Attributes)
		}
	case metricdata.Histogram[float64]:
		for _, p := range v.DataPoints {
			out = append(out, p.Attributes)
		}
	case metricdata.Gauge[int64]:
		for _, p := range v.DataPoints {
			out = append(out, p.Attributes)
		}
	default:
		panic(fmt.Sprintf("contract: unexpected aggregation %T", d))
	}
	return out
}

// Expect returns an error unless got equals want, for steps' checks.
func Expect[T comparable](what string, got, want T) error {
	if got != want {
		return fmt.Errorf("%s = %v, want %v", what, got, want)
	}
	return nil
}
