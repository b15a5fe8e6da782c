package coordination_test

import (
	"context"
	"errors"
	"fmt"
	"io"
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
	"github.com/coordkit/coordination/internal/testharness"
	"github.com/coordkit/coordination/lua"
)

func TestMain(m *testing.M) { testharness.Main(m) }

func TestSlotMatchesTheSpec(t *testing.T) {
	cases := map[string]int{
		"123456789":             12739, // CRC16-XMODEM check value 0x31C3
		"foo":                   12182,
		"bar":                   5061,
		"{user1000}.following":  3443,
		"{user1000}.followers":  3443,
		"user1000":              3443,
		"foo{}{bar}":            8363, // empty first tag: the whole key
		"foo{{bar}}zap":         4015, // hashes "{bar"
		"foo{bar}{zap}":         5061, // only the first tag counts
		"":                      0,
		"\x00\xff binary{}\x01": coordination.Slot("\x00\xff binary{}\x01"),
	}
	for k, want := range cases {
		if got := coordination.Slot(k); got != want {
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
			if got := coordination.Slot(k); int64(got) != want {
				t.Fatalf("Slot(%q) = %d, CLUSTER KEYSLOT says %d", k, got, want)
			}
		}
	}, testharness.Only("cluster"))
}

func TestSameSlot(t *testing.T) {
	if err := coordination.SameSlot("{a}x", "{a}y", "a"); err != nil {
		t.Fatal(err)
	}
	err := coordination.SameSlot("{a}x", "{b}y")
	if !errors.Is(err, coordination.ErrCrossSlot) || strings.Contains(err.Error(), "{a}") {
		t.Fatalf("SameSlot = %v; want ErrCrossSlot that names slots, not keys", err)
	}
	if coordination.SameSlot() != nil || coordination.SameSlot("x") != nil {
		t.Fatal("zero or one key must be fine")
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

func TestClassify(t *testing.T) {
	cases := []struct {
		err       error
		want      coordination.ErrorClass
		ambiguous bool
	}{
		{nil, coordination.NoError, false},
		{context.Canceled, coordination.Canceled, true},
		{fmt.Errorf("wrapped: %w", context.DeadlineExceeded), coordination.Canceled, true},
		{redisErr("LOADING Redis is loading the dataset in memory"), coordination.Transient, false},
		{redisErr("BUSY Redis is busy running a script"), coordination.Transient, false},
		{redisErr("TRYAGAIN Multiple keys request during rehashing of slot"), coordination.Transient, false},
		{redisErr("CLUSTERDOWN The cluster is down"), coordination.Transient, false},
		{redisErr("MASTERDOWN Link with MASTER is down"), coordination.Transient, false},
		{redisErr("READONLY You can't write against a read only replica."), coordination.Transient, false},
		{redisErr("NOREPLICAS Not enough good replicas to write."), coordination.Transient, false},
		{redisErr("ERR max number of clients reached"), coordination.Transient, false},
		{redisErr("NOAUTH Authentication required."), coordination.Terminal, false},
		{redisErr("WRONGPASS invalid username-password pair"), coordination.Terminal, false},
		{redisErr("NOPERM User u has no permissions to run the 'evalsha' command"), coordination.Terminal, false},
		{redisErr("WRONGTYPE Operation against a key holding the wrong kind of value"), coordination.Terminal, false},
		{redisErr("ERR unknown command"), coordination.Terminal, false},
		{redisErr("COORD_BADCOUNTER counter is negative"), coordination.Terminal, false},
		{io.EOF, coordination.Transient, true},
		{io.ErrUnexpectedEOF, coordination.Transient, true},
		{&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, coordination.Transient, false}, // never sent
		{&net.OpError{Op: "read", Err: syscall.ECONNRESET}, coordination.Transient, true},
		{fmt.Errorf("x: %w", syscall.ECONNRESET), coordination.Transient, true},
		{netTimeout{}, coordination.Transient, true},
		{redis.ErrPoolTimeout, coordination.Transient, false}, // never sent
		{redis.ErrClosed, coordination.Terminal, false},
		{coordination.InvalidArgument("ttl", "bad"), coordination.Terminal, false},
		{coordination.ErrClosed, coordination.Terminal, false},
		{errors.New("something else"), coordination.Terminal, false},
	}
	for _, c := range cases {
		if got := coordination.Classify(c.err); got != c.want {
			t.Errorf("Classify(%v) = %v, want %v", c.err, got, c.want)
		}
		if got := coordination.IsAmbiguous(c.err); got != c.ambiguous {
			t.Errorf("IsAmbiguous(%v) = %v, want %v", c.err, got, c.ambiguous)
		}
		if got := coordination.IsTransient(c.err); got != (c.want == coordination.Transient) {
			t.Errorf("IsTransient(%v) = %v", c.err, got)
		}
	}
}

// Errors from real servers (and miniredis' different texts) classify the
// same way, and script error codes map to sentinels on every server.
func TestServerErrorsClassify(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		c := b.Client(t)
		key := b.Key("list")
		if err := c.RPush(ctx, key, "x").Err(); err != nil {
			t.Fatal(err)
		}
		err := c.Incr(ctx, key).Err()
		if coordination.Classify(err) != coordination.Terminal {
			t.Errorf("WRONGTYPE: %v classified %v", err, coordination.Classify(err))
		}
		coord := b.Coordinator(t)
		for code, sentinel := range map[string]error{
			"COORD_BADCOUNTER":        coordination.ErrBadState,
			"COORD_OVERFLOW":          coordination.ErrCounterOverflow,
			"COORD_WRONGTYPE":         coordination.ErrWrongType,
			"COORD_CAPACITY_MISMATCH": coordination.ErrCapacityMismatch,
			"COORD_CONFIG_MISMATCH":   coordination.ErrConfigMismatch,
			"COORD_UNSUPPORTED":       coordination.ErrUnsupportedServer,
			"COORD_BADARG":            coordination.ErrInvalidArgument,
			"COORD_CROSSSLOT":         coordination.ErrCrossSlot,
		} {
			err := c.Eval(ctx, "return redis.error_reply(ARGV[1] .. ' detail text')", []string{key}, code).Err()
			mapped := coordination.MapError(err)
			var se *coordination.ScriptError
			if !errors.Is(mapped, sentinel) || !errors.As(mapped, &se) || se.Code != code || se.Detail != "detail text" {
				t.Errorf("%s: mapped to %#v, want a ScriptError matching %v", code, mapped, sentinel)
			}
		}
		_ = coord
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
	}
	for _, c := range cases {
		got, err := coordination.Millis("ttl", c.d)
		if c.ok != (err == nil) || got != c.want {
			t.Errorf("Millis(%v) = %d, %v", c.d, got, err)
		}
		var ae *coordination.ArgumentError
		if !c.ok && (!errors.As(err, &ae) || ae.Name != "ttl" || !errors.Is(err, coordination.ErrInvalidArgument)) {
			t.Errorf("Millis(%v) error %v does not name ttl", c.d, err)
		}
	}
}

func TestNewValidatesAndNeverTouchesRedis(t *testing.T) {
	b := testharness.Get(t, "miniredis")
	c := b.Client(t)
	k := testharness.CountCommands(c)
	if _, err := coordination.New(c, coordination.WithHooks(nil)); !errors.Is(err, coordination.ErrInvalidArgument) {
		t.Errorf("nil hook: %v", err)
	}
	if _, err := coordination.New(c, coordination.WithMeterProvider(nil)); !errors.Is(err, coordination.ErrInvalidArgument) {
		t.Errorf("nil meter provider: %v", err)
	}
	if _, err := coordination.New(c, coordination.WithLogger(nil)); !errors.Is(err, coordination.ErrInvalidArgument) {
		t.Errorf("nil logger: %v", err)
	}
	coord, err := coordination.New(c, coordination.WithKeyPrefix("p:"))
	if err != nil {
		t.Fatal(err)
	}
	if coord.Key("k") != "p:k" || coord.Prefix() != "p:" || coord.Client() != c || coord.Channel("k") != "coordination:p:k" {
		t.Fatal("accessors")
	}
	var nilCoord *coordination.Coordinator
	if err := nilCoord.Check(); !errors.Is(err, coordination.ErrInvalidArgument) {
		t.Errorf("nil coordinator Check: %v", err)
	}
	if k.Count() != 0 {
		t.Fatalf("New sent %v", k.Names())
	}
}

func TestEvalCrossSlotSendsNothing(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		c := b.Client(t)
		coord, _ := coordination.New(c)
		k := testharness.CountCommands(c)
		_, err := coord.Eval(context.Background(), lua.FencingAcquire, []string{"{a}1", "{b}2"}, "tok", 1000)
		if !errors.Is(err, coordination.ErrCrossSlot) || k.Count() != 0 {
			t.Fatalf("cross-slot Eval: %v, sent %v", err, k.Names())
		}
	}, testharness.Only("miniredis", "cluster"))
}

// The duration hook records coordination.operation.duration with the
// operation name and outcome, and never a key.
func TestDurationHistogram(t *testing.T) {
	reader := metric.NewManualReader()
	mp := metric.NewMeterProvider(metric.WithReader(reader))
	b := testharness.Get(t, "miniredis")
	coord, err := coordination.New(b.Client(t), coordination.WithMeterProvider(mp))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, finish, err := coord.Admit(ctx, hooks.LockAcquire, "lock")
	if err != nil {
		t.Fatal(err)
	}
	finish(nil)
	_, finish, _ = coord.Admit(ctx, hooks.LockAcquire, "lock")
	finish(context.Canceled)
	_, finish, _ = coord.Admit(ctx, hooks.LockRelease, "lock")
	finish(errors.New("boom"))

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != hooks.DurationMetric {
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
	want := map[string]uint64{"LOCK ACQUIRE/succeeded": 1, "LOCK ACQUIRE/canceled": 1, "LOCK RELEASE/failed": 1}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("histogram counts %v, want %v", got, want)
	}
}

// Watch shares one Pub/Sub connection among every waiter of a coordinator
// and closes it when the last waiter leaves.
func TestWatchSharesOneConnection(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		ctx := context.Background()
		client := b.Client(t, func(o *redis.Options) { o.ClientName = "watch-test" })
		coord, _ := coordination.New(client, coordination.WithKeyPrefix(b.Prefix()))
		before := client.PoolStats().TotalConns
		var ws []*coordination.Watch
		for i := range 20 {
			w, err := coord.Watch(ctx, fmt.Sprintf("key-%d", i%5))
			if err != nil {
				t.Fatal(err)
			}
			ws = append(ws, w)
		}
		pub := b.Client(t)
		if err := pub.Publish(ctx, coord.Channel("key-3"), "released").Err(); err != nil {
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
		// Pub/Sub connections are not pool connections; the pool is unchanged.
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

// pubsubConns counts the server's Pub/Sub connections opened by this
// test's client (CLIENT LIST TYPE pubsub, filtered by the client name the
// test sets, since the shared server serves other tests too).
func pubsubConns(t *testing.T, b *testharness.Backend) int {
	t.Helper()
	out, err := b.Client(t).Do(context.Background(), "CLIENT", "LIST", "TYPE", "pubsub").Text()
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
