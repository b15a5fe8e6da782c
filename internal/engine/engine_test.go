package engine_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/hooks"
	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/decode"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/lockcore"
	"github.com/coordkit/coordination/internal/sentinel"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

func TestMain(m *testing.M) { testharness.Main(m) }

func eng(t testing.TB, c *coordination.Coordinator) *engine.Engine {
	t.Helper()
	e, err := engine.Of(c)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestSlotMatchesTheSpec(t *testing.T) {
	cases := map[string]int{
		"123456789":            12739, // CRC16-XMODEM check value 0x31C3
		"foo":                  12182,
		"bar":                  5061,
		"{user1000}.following": 3443,
		"{user1000}.followers": 3443,
		"user1000":             3443,
		"foo{}{bar}":           8363, // empty first tag: the whole key
		"foo{{bar}}zap":        4015, // hashes "{bar"
		"foo{bar}{zap}":        5061, // only the first tag counts
		"":                     0,
	}
	for k, want := range cases {
		if got := engine.Slot(k); got != want {
			t.Errorf("Slot(%q) = %d, want %d", k, got, want)
		}
	}
}

func TestSlotAgreesWithTheCluster(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		c := b.Client(t)
		for i := range 200 {
			k := fmt.Sprintf("key:%d:{tag%d}x\xfe%d", i, i%7, i*31)
			if i%3 == 0 {
				k = fmt.Sprintf("plain-%d-\x00-%d", i, i*i)
			}
			want, err := c.ClusterKeySlot(ctx, k).Result()
			if err != nil {
				t.Fatal(err)
			}
			if got := engine.Slot(k); int64(got) != want {
				t.Fatalf("Slot(%q) = %d, CLUSTER KEYSLOT says %d", k, got, want)
			}
		}
	}, testharness.Only("cluster"))
}

func TestSameSlot(t *testing.T) {
	if err := engine.SameSlot("{a}x", "{a}y", "a"); err != nil {
		t.Fatal(err)
	}
	err := engine.SameSlot("{a}x", "{b}y")
	if !errors.Is(err, coordination.ErrInvalidArgument) || strings.Contains(err.Error(), "{a}") {
		t.Fatalf("SameSlot = %v; want ErrInvalidArgument that names slots, not keys", err)
	}
	if engine.SameSlot() != nil || engine.SameSlot("x") != nil {
		t.Fatal("zero or one key must be fine")
	}
}

// Keys applies the prefix (which counts for the slot) and refuses a
// cross-slot pair before anything is sent.
func TestKeysPrefixAndCrossSlot(t *testing.T) {
	b := testharness.Get(t, "miniredis")
	c := b.Client(t)
	k := testharness.CountCommands(c)
	coord, _ := coordination.New(c, coordination.WithKeyPrefix("p:"))
	e := eng(t, coord)
	if got := e.Key("k").Full(); len(got) != 1 || got[0] != "p:k" {
		t.Fatalf("Key = %v", got)
	}
	if _, err := e.NamedKeys(nil, "{a}1", "{b}2"); !errors.Is(err, coordination.ErrInvalidArgument) {
		t.Fatalf("cross-slot Keys: %v", err)
	}
	tagged, _ := coordination.New(c, coordination.WithKeyPrefix("{p}:"))
	if _, err := eng(t, tagged).NamedKeys(nil, "{a}1", "{b}2"); err != nil {
		t.Fatalf("a prefix with a hash tag puts every key in one slot: %v", err)
	}
	if k.Count() != 0 {
		t.Fatalf("sent %v", k.Names())
	}
}

// redisErr is a reply error as go-redis reports server errors.
type redisErr string

func (e redisErr) Error() string { return string(e) }
func (redisErr) RedisError()     {}

type netTimeout struct{}

func (netTimeout) Error() string   { return "i/o timeout" }
func (netTimeout) Timeout() bool   { return true }
func (netTimeout) Temporary() bool { return true }

// Classify, IsAmbiguous (a client that may re-send: go-redis' default) and
// Engine.Ambiguous on a client that never re-sends (MaxRetries -1), where
// an error reply also proves nothing ran; a failed dial or a pool timeout
// proves it on every client.
func TestClassifyAndAmbiguity(t *testing.T) {
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	cases := []struct {
		err                  error
		want                 engine.ErrorClass
		ambiguous, noResends bool
	}{
		{nil, engine.NoError, false, false},
		{context.Canceled, engine.Canceled, true, true},
		{fmt.Errorf("wrapped: %w", context.DeadlineExceeded), engine.Canceled, true, true},
		{engine.GaveUp(context.Background()), engine.Canceled, true, true},
		{redisErr("LOADING Redis is loading the dataset in memory"), engine.Transient, true, false},
		{redisErr("BUSY Redis is busy running a script"), engine.Transient, true, false},
		{redisErr("TRYAGAIN Multiple keys request during rehashing of slot"), engine.Transient, true, false},
		{redisErr("CLUSTERDOWN The cluster is down"), engine.Transient, true, false},
		{redisErr("MASTERDOWN Link with MASTER is down"), engine.Transient, true, false},
		{redisErr("READONLY You can't write against a read only replica."), engine.Transient, true, false},
		{redisErr("NOREPLICAS Not enough good replicas to write."), engine.Transient, true, false},
		{redisErr("ERR max number of clients reached"), engine.Transient, true, false},
		{redisErr("NOAUTH Authentication required."), engine.Terminal, false, false},
		{redisErr("WRONGPASS invalid username-password pair"), engine.Terminal, false, false},
		{redisErr("NOPERM User u has no permissions to run the 'get' command"), engine.Terminal, false, false},
		{redisErr("WRONGTYPE Operation against a key holding the wrong kind of value"), engine.Terminal, false, false},
		{redisErr("ERR unknown command"), engine.Terminal, false, false},
		{engine.MapError(redisErr("COORD_BADCOUNTER counter is negative")), engine.Terminal, false, false},
		{io.EOF, engine.Transient, true, true},
		{io.ErrUnexpectedEOF, engine.Transient, true, true},
		{dial, engine.Transient, false, false},
		{fmt.Errorf("wrapped: %w", dial), engine.Transient, false, false},
		{&net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "h.invalid", IsNotFound: true}}, engine.Transient, false, false},
		{&net.OpError{Op: "dial", Net: "tcp", Err: netTimeout{}}, engine.Transient, false, false},
		{&net.OpError{Op: "dial", Net: "tcp", Err: context.DeadlineExceeded}, engine.Canceled, false, false},
		{&net.OpError{Op: "read", Err: syscall.ECONNRESET}, engine.Transient, true, true},
		{fmt.Errorf("x: %w", syscall.ECONNRESET), engine.Transient, true, true},
		{netTimeout{}, engine.Transient, true, true},
		{redis.ErrPoolTimeout, engine.Transient, false, false},
		{fmt.Errorf("wrapped: %w", redis.ErrPoolTimeout), engine.Transient, false, false},
		{redis.ErrClosed, engine.Terminal, false, false},
		{check.InvalidArgument("ttl", "bad"), engine.Terminal, false, false},
		{coordination.ErrClosed, engine.Terminal, false, false},
		{errors.New("something else"), engine.Terminal, false, false},
	}
	b := testharness.Get(t, "miniredis")
	resending := eng(t, b.Coordinator(t))
	once := eng(t, must(coordination.New(b.Client(t, func(o *redis.Options) { o.MaxRetries = -1 })))(t))
	for _, c := range cases {
		if got := engine.Classify(c.err); got != c.want {
			t.Errorf("Classify(%v) = %v, want %v", c.err, got, c.want)
		}
		if got := coordination.IsTransient(c.err); got != (c.want == engine.Transient) {
			t.Errorf("coordination.IsTransient(%v) = %v, want class %v", c.err, got, c.want)
		}
		if got := coordination.IsAmbiguous(c.err); got != c.ambiguous {
			t.Errorf("IsAmbiguous(%v) = %v, want %v", c.err, got, c.ambiguous)
		}
		if got := resending.Ambiguous(c.err); got != c.ambiguous {
			t.Errorf("Ambiguous(%v) on a re-sending client = %v, want %v", c.err, got, c.ambiguous)
		}
		if got := once.Ambiguous(c.err); got != c.noResends {
			t.Errorf("Ambiguous(%v) on a client with MaxRetries -1 = %v, want %v", c.err, got, c.noResends)
		}
	}
}

func must[T any](v T, err error) func(testing.TB) T {
	return func(t testing.TB) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// Script error codes map to sentinels on every server, and so does a
// WRONGTYPE raised by redis.call inside a script; other errors (NOPERM)
// pass through unchanged.
func TestServerErrorsMap(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		c := b.Raw(t) // RPUSH to seed a wrong type
		key := b.Key("list")
		if err := c.RPush(ctx, key, "x").Err(); err != nil {
			t.Fatal(err)
		}
		for code, sentinel := range map[string]error{
			"COORD_BADCOUNTER":        coordination.ErrBadState,
			"COORD_OVERFLOW":          coordination.ErrBadState,
			"COORD_WRONGTYPE":         coordination.ErrBadState,
			"COORD_CAPACITY_MISMATCH": coordination.ErrConfigMismatch,
			"COORD_CONFIG_MISMATCH":   coordination.ErrConfigMismatch,
			"COORD_UNSUPPORTED":       coordination.ErrUnsupportedServer,
			"COORD_BADARG":            coordination.ErrInvalidArgument,
			"COORD_CROSSSLOT":         coordination.ErrInvalidArgument,
		} {
			err := engine.MapError(c.Eval(ctx, "return redis.error_reply(ARGV[1] .. ' detail text')", []string{key}, code).Err())
			if got, ok := engine.ScriptCode(err); !errors.Is(err, sentinel) || !ok || got != code || !strings.Contains(err.Error(), "detail text") {
				t.Errorf("%s: mapped to %v, want an error matching %v", code, err, sentinel)
			}
		}
		err := engine.MapError(c.Eval(ctx, "return redis.call('GET', KEYS[1])", []string{key}).Err())
		if code, _ := engine.ScriptCode(err); !errors.Is(err, coordination.ErrBadState) || code != "COORD_WRONGTYPE" || !strings.Contains(err.Error(), "wrong Redis type") {
			t.Errorf("WRONGTYPE raised in a script: %v, want ErrBadState saying wrong Redis type", err)
		}
		plain := redisErr("NOPERM User u has no permissions to run the 'get' command")
		if got := engine.MapError(plain); got != error(plain) {
			t.Errorf("NOPERM mapped to %v", got)
		}
	})
}

func TestMillis(t *testing.T) {
	cases := []struct {
		d    time.Duration
		want int64
		ok   bool
	}{
		{time.Millisecond, 1, true},
		{1500 * time.Microsecond, 2, true}, // rounded up, never shortened
		{time.Second, 1000, true},
		{time.Second + 1, 1001, true},
		{999 * time.Microsecond, 0, false},
		{0, 0, false},
		{-time.Second, 0, false},
		{check.MaxMillis, int64(check.MaxMillis / time.Millisecond), true},
		{check.MaxMillis + 1, 0, false}, // would round up past a Duration
		{math.MaxInt64, 0, false},
	}
	for _, c := range cases {
		got, err := check.Millis("ttl", c.d)
		if c.ok != (err == nil) || got != c.want {
			t.Errorf("Millis(%v) = %d, %v", c.d, got, err)
		}
		if name, _ := check.ArgumentName(err); !c.ok && (name != "ttl" || !errors.Is(err, coordination.ErrInvalidArgument)) {
			t.Errorf("Millis(%v) error %v does not name ttl", c.d, err)
		}
	}
}

// AtLeast checks when applied, with the messages the options had before
// it: Millis' for 1 ms, "must not be negative" for 0, and for counts the
// same words with %d.
func TestAtLeast(t *testing.T) {
	type cfg struct {
		d time.Duration
		n int
	}
	durations := []struct {
		d, least time.Duration
		msg      string // "" when accepted
	}{
		{time.Millisecond, time.Millisecond, ""},
		{999 * time.Microsecond, time.Millisecond, "must be at least 1ms, got 999µs"},
		{0, 0, ""},
		{-time.Second, 0, "must not be negative, got -1s"},
		{time.Second, time.Second, ""},
		{time.Second - 1, time.Second, "must be at least 1s, got 999.999999ms"},
		{check.MaxMillis, time.Millisecond, ""},
		{math.MaxInt64, time.Millisecond, "must be at most 2562047h47m16.854s, got 2562047h47m16.854775807s"},
	}
	for _, c := range durations {
		var got cfg
		err := check.AtLeast("thing", c.d, c.least, func(x *cfg) { x.d = c.d })(&got)
		if c.msg == "" {
			if err != nil || got.d != c.d {
				t.Errorf("AtLeast(%v, %v) = %v, set %v", c.d, c.least, err, got.d)
			}
			continue
		}
		if name, _ := check.ArgumentName(err); name != "thing" || !errors.Is(err, coordination.ErrInvalidArgument) ||
			!strings.Contains(err.Error(), c.msg) || got.d != 0 {
			t.Errorf("AtLeast(%v, %v) = %v (set %v), want %q naming thing", c.d, c.least, err, got.d, c.msg)
		}
	}
	counts := []struct {
		n, least int
		msg      string
	}{
		{1, 1, ""},
		{0, 1, "must be at least 1, got 0"},
		{0, 0, ""},
		{-3, 0, "must not be negative, got -3"},
	}
	for _, c := range counts {
		var got cfg
		err := check.AtLeast("thing", c.n, c.least, func(x *cfg) { x.n = c.n })(&got)
		if c.msg == "" {
			if err != nil || got.n != c.n {
				t.Errorf("AtLeast(%d, %d) = %v, set %d", c.n, c.least, err, got.n)
			}
			continue
		}
		if name, _ := check.ArgumentName(err); name != "thing" || !strings.Contains(err.Error(), c.msg) || got.n != 0 {
			t.Errorf("AtLeast(%d, %d) = %v (set %d), want %q naming thing", c.n, c.least, err, got.n, c.msg)
		}
	}
	if _, err := check.Millis("thing", 999*time.Microsecond); !strings.Contains(err.Error(), "must be at least 1ms, got 999µs") {
		t.Errorf("Millis' message changed: %v", err)
	}
}

// OutcomeOf is the one place outcomes are decided.
func TestOutcomeOf(t *testing.T) {
	answer := errors.New("thing: exists")
	sentinel.RegisterAnswers(answer)
	cases := []struct {
		err  error
		want hooks.Outcome
	}{
		{nil, hooks.Succeeded},
		{coordination.ErrNotAcquired, hooks.Succeeded},
		{answer, hooks.Succeeded},
		{fmt.Errorf("%w (generation 3)", answer), hooks.Succeeded},
		{engine.GaveUp(context.Background()), hooks.Canceled},
		{context.Canceled, hooks.Canceled},
		{fmt.Errorf("x: %w", context.DeadlineExceeded), hooks.Canceled},
		{redisErr("LOADING"), hooks.Failed},
		{coordination.ErrBadState, hooks.Failed},
		{errors.New("boom"), hooks.Failed},
	}
	for _, c := range cases {
		if got := engine.OutcomeOf(c.err); got != c.want {
			t.Errorf("OutcomeOf(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// Decoders are strict: a reply of an unknown shape or code is an error
// wrapping ErrBadState that describes the shape, never the contents.
func TestStrictDecoders(t *testing.T) {
	if o, ok := decode.Release(int64(-1)); !ok || o != decode.NotOwned {
		t.Fatal("release -1")
	}
	for _, v := range []any{int64(2), int64(-2), "1", nil, []any{int64(1)}} {
		if _, ok := decode.Release(v); ok {
			t.Errorf("ReleaseReply(%#v) accepted", v)
		}
		if _, ok := decode.Bool01(v); ok && v != int64(1) && v != int64(0) {
			t.Errorf("Bool01(%#v) accepted", v)
		}
	}
	if _, ok := decode.Bool01(int64(2)); ok {
		t.Error("Bool01(2) accepted")
	}
	if _, ok := decode.PositiveDecimal("0"); ok {
		t.Error("PositiveDecimal(0) accepted")
	}
	if n, ok := decode.PositiveDecimal("9223372036854775807"); !ok || n != 1<<63-1 {
		t.Error("PositiveDecimal(max)")
	}
	err := decode.Unexpected("lock_acquire", []any{"s3cret-token", int64(1)})
	if !errors.Is(err, coordination.ErrBadState) || strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "string of 12 bytes") {
		t.Errorf("UnexpectedReply = %v", err)
	}
	// A script whose reply does not fit its decoder fails with ErrBadState.
	b := testharness.Get(t, "miniredis")
	c := b.Client(t)
	e := eng(t, b.Coordinator(t))
	if err := c.Set(context.Background(), b.Key("k"), "other", 0).Err(); err != nil {
		t.Fatal(err)
	}
	// Another program's script stored a value the release script reads as
	// held by another owner: a real answer, decoded as NotOwned.
	if out, err := lockcore.Release.Run(context.Background(), e, e.Key("k"), "mine"); err != nil || out != decode.NotOwned {
		t.Fatalf("release of another's lock = %v, %v", out, err)
	}
}

// Describe gives a one-line, log-safe description: the server's reply text,
// never an address or a password.
func TestDescribe(t *testing.T) {
	dial := &net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 6380}, Err: syscall.ECONNREFUSED}
	cases := map[error]string{
		redisErr("NOAUTH Authentication required."):                               "terminal: server replied NOAUTH Authentication required.",
		redisErr("WRONGPASS invalid username-password pair or user"):              "terminal: server replied WRONGPASS invalid username-password pair or user",
		redisErr("NOPERM User alice has no permissions to run the 'get' command"): "terminal: server replied NOPERM User <user> has no permissions to run the 'get' command",
		dial:                     "transient: dial: connection refused",
		context.DeadlineExceeded: "canceled: context deadline exceeded",
		redis.ErrPoolTimeout:     "transient: connection pool timeout",
		io.EOF:                   "transient: connection closed by the server",
		errors.New("pw=hunter2"): "terminal: *errors.errorString",
		coordination.ErrBadState: "terminal: coordination: key holds unexpected state",
	}
	for err, want := range cases {
		if got := engine.Describe(err); got != want {
			t.Errorf("Describe(%v) = %q, want %q", err, got, want)
		}
	}
	if got := engine.Describe(dial); strings.Contains(got, "10.1.2.3") || strings.Contains(got, "6380") {
		t.Errorf("Describe leaks the address: %q", got)
	}
}

// The coordinator records coordination.operation.duration with the
// operation name and outcome, and never a key.
func TestDurationHistogram(t *testing.T) {
	reader := metric.NewManualReader()
	mp := metric.NewMeterProvider(metric.WithReader(reader))
	b := testharness.Get(t, "miniredis")
	e := eng(t, must(coordination.New(b.Client(t), coordination.WithMeterProvider(mp)))(t))
	ctx := context.Background()
	_, op, _ := e.Admit(ctx, hooks.LockAcquire, "lock")
	op.End(nil)
	_, op, _ = e.Admit(ctx, hooks.LockAcquire, "lock")
	op.End(coordination.ErrNotAcquired)
	_, op, _ = e.Admit(ctx, hooks.LockAcquire, "lock")
	op.End(context.Canceled)
	_, op, _ = e.Admit(ctx, hooks.LockRelease, "lock")
	op.End(errors.New("boom"))

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != engine.OperationDuration.Name {
				continue
			}
			for _, dp := range m.Data.(metricdata.Histogram[float64]).DataPoints {
				op, _ := dp.Attributes.Value("operation")
				oc, _ := dp.Attributes.Value("outcome")
				if dp.Attributes.Len() != 2 {
					t.Errorf("attributes %v: want only operation and outcome", dp.Attributes.ToSlice())
				}
				got[op.AsString()+"/"+oc.AsString()] += dp.Count
			}
		}
	}
	want := map[string]uint64{"LOCK ACQUIRE/succeeded": 2, "LOCK ACQUIRE/canceled": 1, "LOCK RELEASE/failed": 1}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("histogram counts %v, want %v", got, want)
	}
}

// Watch shares one Pub/Sub connection among every waiter of a coordinator
// and closes it when the last waiter leaves.
func TestWatchSharesOneConnection(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		// CLIENT SETNAME names the connections for CLIENT LIST: not the
		// least-privilege user's.
		client := b.Admin(t, func(o *redis.Options) { o.ClientName = "watch-test" })
		coord, _ := coordination.New(client, coordination.WithKeyPrefix(b.Prefix()))
		e := eng(t, coord)
		before := client.PoolStats().TotalConns
		var ws []*engine.Watch
		for i := range 20 {
			w, err := e.Watch(ctx, e.Key(fmt.Sprintf("key-%d", i%5)).Full()[0])
			if err != nil {
				t.Fatal(err)
			}
			ws = append(ws, w)
		}
		pub := b.Client(t)
		if err := testharness.Publish(ctx, pub, b.Key("key-3"), "released"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
		for i, w := range ws {
			select {
			case <-w.C():
				if i%5 != 3 {
					t.Errorf("waiter %d on key-%d woke for key-3", i, i%5)
				}
			default:
				if i%5 == 3 {
					t.Errorf("waiter %d on key-3 not woken", i)
				}
			}
		}
		if after := client.PoolStats().TotalConns; after > before+1 {
			t.Errorf("pool grew from %d to %d connections for 20 waiters", before, after)
		}
		if !b.IsMini() {
			if n := pubsubConns(t, b); n != 1 {
				t.Errorf("20 waiters on 5 keys use %d Pub/Sub connections, want 1", n)
			}
		}
		for _, w := range ws {
			w.Close()
			w.Close() // idempotent
		}
		if !b.IsMini() {
			deadline := time.Now().Add(2 * time.Second)
			for pubsubConns(t, b) != 0 && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if n := pubsubConns(t, b); n != 0 {
				t.Errorf("%d Pub/Sub connections left after every waiter closed", n)
			}
		}
	}, testharness.StandaloneOnly())
}

func pubsubConns(t *testing.T, b *testharness.Backend) int {
	t.Helper()
	out, err := b.Admin(t).Do(context.Background(), "CLIENT", "LIST", "TYPE", "pubsub").Text()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.Contains(line, "name=watch-test") {
			n++
		}
	}
	return n
}

// Background cleanups are bounded: past MaxCleanups running at once a new
// one is given up at once and counted with reason overflow.
func TestCleanupOverflowIsCounted(t *testing.T) {
	reader := metric.NewManualReader()
	mp := metric.NewMeterProvider(metric.WithReader(reader))
	b := testharness.Get(t, "miniredis")
	e := eng(t, must(coordination.New(b.Client(t), coordination.WithMeterProvider(mp)))(t))
	release := make(chan struct{})
	for range engine.MaxCleanups {
		e.Cleanup("test", time.Minute, func(ctx context.Context) error {
			<-release
			return nil
		})
	}
	ran := false
	e.Cleanup("test", time.Minute, func(context.Context) error { ran = true; return nil })
	if n := e.Cleanups(); n != engine.MaxCleanups {
		t.Fatalf("%d cleanups running, want %d", n, engine.MaxCleanups)
	}
	close(release)
	deadline := time.Now().Add(5 * time.Second)
	for e.Cleanups() != 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if ran {
		t.Fatal("the cleanup past the bound ran")
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var overflow int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == engine.CleanupAbandoned.Name {
				for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
					if r, _ := dp.Attributes.Value("reason"); r.AsString() == "overflow" {
						overflow += dp.Value
					}
				}
			}
		}
	}
	if overflow != 1 {
		t.Fatalf("abandoned{reason=overflow} = %d, want 1", overflow)
	}
}

func engineWithPrefix(t *testing.T, prefix string) *engine.Engine {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = c.Close() })
	coord, err := coordination.New(c, coordination.WithKeyPrefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.Of(coord)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// A ttl refusal says what the rule is: where 0 means no expiry, the
// message says so (it said "at least 1ms" while 0 was accepted).
func TestTTLMillisMessage(t *testing.T) {
	if ms, err := check.TTLMillis(0, true); ms != 0 || err != nil {
		t.Fatalf("TTLMillis(0, no expiry) = %d, %v", ms, err)
	}
	_, err := check.TTLMillis(-1, true)
	if want := "coordination: invalid argument ttl: must be 0 (no expiry) or at least 1ms, got -1ns"; err == nil || err.Error() != want || !errors.Is(err, sentinel.ErrInvalidArgument) {
		t.Fatalf("TTLMillis(-1, no expiry) = %v, want %q", err, want)
	}
	_, err = check.TTLMillis(0, false)
	if want := "coordination: invalid argument ttl: must be at least 1ms, got 0s"; err == nil || err.Error() != want {
		t.Fatalf("TTLMillis(0) = %v, want %q", err, want)
	}
}
