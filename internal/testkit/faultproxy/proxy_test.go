package faultproxy_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/coordkit/coordination/internal/testkit/faultproxy"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// env is a proxy in front of the first available real server, and a direct
// client of that server to look behind the proxy's back.
type env struct {
	b      *testharness.Backend
	p      *faultproxy.Proxy
	direct redis.UniversalClient
}

func newEnv(t *testing.T) *env {
	t.Helper()
	b := testharness.Get(t, testharness.FirstFlavor(t))
	return &env{b: b, p: faultproxy.Start(t, b.Server.Addr), direct: b.Admin(t)}
}

// client returns a go-redis client that goes through the proxy (the
// harness' options: 2 s read timeout, go-redis' default 3 retries, RESP3),
// closed when the test ends.
func (e *env) client(t *testing.T, modify ...func(*redis.Options)) *redis.Client {
	t.Helper()
	o := e.b.Server.Options()
	o.Addr = e.p.Addr()
	for _, m := range modify {
		m(o)
	}
	c := redis.NewClient(o)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func noRetries(o *redis.Options) { o.MaxRetries = -1 }

// get returns the key's value read directly from the server, "" if absent.
func (e *env) get(t *testing.T, key string) string {
	t.Helper()
	v, err := e.direct.Get(context.Background(), key).Result()
	if errors.Is(err, redis.Nil) {
		return ""
	}
	if err != nil {
		t.Fatalf("direct GET %s: %v", key, err)
	}
	return v
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func TestPassThrough(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	c := e.client(t)
	k := e.b.Key("k")
	if err := c.Set(ctx, k, "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if v, err := c.Get(ctx, k).Result(); err != nil || v != "v" {
		t.Fatalf("GET = %q, %v", v, err)
	}
	if v := e.get(t, k); v != "v" {
		t.Fatalf("direct GET = %q", v)
	}
	s := e.p.Stats()
	if s.Commands["SET"] != 1 || s.Commands["GET"] != 1 || s.Accepted != 1 || s.ParseErrors != 0 {
		t.Fatalf("stats %+v", s)
	}
}

func TestDropReplyIsRetriedOnANewConnection(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	c := e.client(t)
	k := e.b.Key("k")
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	drop := e.p.Apply(faultproxy.DropReply(faultproxy.Named("SET"), 1))
	if err := c.Set(ctx, k, "v", 0).Err(); err != nil {
		t.Fatalf("SET through a dropped reply with retries: %v", err)
	}
	select {
	case <-drop.Done():
	default:
		t.Fatal("rule not used up after firing once")
	}
	s := e.p.Stats()
	if s.Commands["SET"] != 2 || s.DroppedReplies != 1 || drop.Fired() != 1 || s.Accepted != 2 {
		t.Fatalf("SET seen %d times, %d replies dropped, fired %d, %d connections; want 2, 1, 1, 2",
			s.Commands["SET"], s.DroppedReplies, drop.Fired(), s.Accepted)
	}
	if v := e.get(t, k); v != "v" {
		t.Fatalf("server has %q, want v", v)
	}
}

func TestDropReplyWithoutRetriesLeavesTheWriteBehind(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	c := e.client(t, noRetries)
	k := e.b.Key("k")
	e.p.Apply(faultproxy.DropReply(faultproxy.Named("SET"), 1))
	err := c.Set(ctx, k, "v", 0).Err()
	if !errors.Is(err, io.EOF) {
		t.Fatalf("SET = %v, want EOF (the lost reply)", err)
	}
	if v := e.get(t, k); v != "v" {
		t.Fatalf("server has %q, want v: the command ran", v)
	}
	if n := e.p.Stats().Commands["SET"]; n != 1 {
		t.Fatalf("SET seen %d times, want 1", n)
	}
	// The next command works, on a new connection.
	if v, err := c.Get(ctx, k).Result(); err != nil || v != "v" {
		t.Fatalf("GET after = %q, %v", v, err)
	}
}

func TestRawCut(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, mode := range []faultproxy.CutMode{faultproxy.RST, faultproxy.FIN} {
		nc, err := net.Dial("tcp", e.p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		if _, err := nc.Write([]byte("PING\r\n")); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 64)
		n, err := io.ReadAtLeast(nc, buf, 7)
		if err != nil || string(buf[:n]) != "+PONG\r\n" {
			t.Fatalf("PING = %q, %v", buf[:n], err)
		}
		if got := e.p.CutAll(mode); got != 1 {
			t.Fatalf("CutAll = %d, want 1", got)
		}
		_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err = nc.Read(buf)
		switch mode {
		case faultproxy.RST:
			if !errors.Is(err, syscall.ECONNRESET) {
				t.Fatalf("read after CutAll(RST) = %v, want connection reset", err)
			}
		case faultproxy.FIN:
			if !errors.Is(err, io.EOF) {
				t.Fatalf("read after CutAll(FIN) = %v, want EOF", err)
			}
		}
	}
	if s := e.p.Stats(); s.Cut != 2 || s.Commands["PING"] != 2 {
		t.Fatalf("stats %+v, want 2 cut and 2 PING", s)
	}
}

func TestCutAllThenReconnect(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	c := e.client(t)
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if n := e.p.CutAll(faultproxy.RST); n != 1 {
		t.Fatalf("CutAll = %d, want 1 (the pooled connection)", n)
	}
	// go-redis notices the dead pooled connection (or retries) and dials
	// again.
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after CutAll: %v", err)
	}
	if s := e.p.Stats(); s.Cut != 1 || s.Accepted != 2 {
		t.Fatalf("%d cut, %d accepted; want 1, 2", s.Cut, s.Accepted)
	}
}

func TestErrorAfterForwarding(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	c := e.client(t)
	k := e.b.Key("k")
	rule := e.p.Apply(faultproxy.ErrorReply(faultproxy.Named("SET"), "ERR injected", true, 1))
	err := c.Set(ctx, k, "v", 0).Err()
	if err == nil || err.Error() != "ERR injected" {
		t.Fatalf("SET = %v, want ERR injected", err)
	}
	if v := e.get(t, k); v != "v" {
		t.Fatalf("server has %q, want v: the command was forwarded and ran", v)
	}
	s := e.p.Stats()
	if s.Commands["SET"] != 1 || s.ReplacedReplies != 1 || s.InjectedErrors != 0 || rule.Fired() != 1 {
		t.Fatalf("SET seen %d, replaced %d, injected %d, fired %d; want 1, 1, 0, 1",
			s.Commands["SET"], s.ReplacedReplies, s.InjectedErrors, rule.Fired())
	}
}

func TestLoadingAfterForwardingIsRetriedByGoRedis(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	c := e.client(t) // MaxRetries: go-redis' default 3
	k := e.b.Key("n")
	e.p.Apply(faultproxy.ErrorReply(faultproxy.Named("INCR"), faultproxy.Loading, true, 2))
	// Two LOADING replies, each after the server ran INCR, then the third
	// attempt's real reply.
	if v, err := c.Incr(ctx, k).Result(); err != nil || v != 3 {
		t.Fatalf("INCR = %d, %v; want 3 (run three times), nil", v, err)
	}
	if n := e.p.Stats().Commands["INCR"]; n != 3 {
		t.Fatalf("INCR seen %d times, want 3", n)
	}
	// Every attempt answered LOADING: 1 + 3 retries, then the error.
	e.p.Apply(faultproxy.ErrorReply(faultproxy.Named("INCR"), faultproxy.Loading, true, faultproxy.Forever))
	err := c.Incr(ctx, k).Err()
	if !redis.HasErrorPrefix(err, "LOADING") {
		t.Fatalf("INCR = %v, want LOADING", err)
	}
	if n := e.p.Stats().Commands["INCR"]; n != 3+4 {
		t.Fatalf("INCR seen %d times, want 7", n)
	}
	if v := e.get(t, k); v != "7" {
		t.Fatalf("server has %s, want 7", v)
	}
}

func TestErrorInsteadOfForwarding(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	c := e.client(t)
	k := e.b.Key("k")
	e.p.Apply(faultproxy.ErrorReply(faultproxy.Named("SET"), "ERR injected", false, 1))
	if err := c.Set(ctx, k, "v", 0).Err(); err == nil || err.Error() != "ERR injected" {
		t.Fatalf("SET = %v, want ERR injected", err)
	}
	if v := e.get(t, k); v != "" {
		t.Fatalf("server has %q: the command should not have been forwarded", v)
	}
	// READONLY is retried by go-redis: 4 attempts, none forwarded.
	e.p.Apply(faultproxy.ErrorReply(faultproxy.Named("SET"), faultproxy.ReadOnly, false, faultproxy.Forever))
	if err := c.Set(ctx, k, "v", 0).Err(); !redis.HasErrorPrefix(err, "READONLY") {
		t.Fatalf("SET = %v, want READONLY", err)
	}
	if v := e.get(t, k); v != "" {
		t.Fatalf("server has %q: no SET should have been forwarded", v)
	}
	if s := e.p.Stats(); s.Commands["SET"] != 5 || s.InjectedErrors != 5 || s.ReplacedReplies != 0 {
		t.Fatalf("SET seen %d, injected %d, replaced %d; want 5, 5, 0", s.Commands["SET"], s.InjectedErrors, s.ReplacedReplies)
	}
}

func TestInjectedErrorsKeepReplyOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	c := e.client(t)
	k := e.b.Key("n")
	// The first INCR's reply is held, so the error answering the ECHO after
	// it must wait behind it.
	e.p.Apply(faultproxy.DelayReply(faultproxy.Named("INCR"), 300*time.Millisecond, 1))
	e.p.Apply(faultproxy.ErrorReply(faultproxy.Named("ECHO"), "ERR injected", false, faultproxy.Forever))
	cmds, _ := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Incr(ctx, k)
		p.Echo(ctx, "a")
		p.Incr(ctx, k)
		p.Echo(ctx, "b")
		p.Get(ctx, k)
		return nil
	})
	want := []string{"1", "ERR injected", "2", "ERR injected", "2"}
	if got := results(cmds); !slices.Equal(got, want) {
		t.Fatalf("pipeline = %q, want %q", got, want)
	}
	if s := e.p.Stats(); s.InjectedErrors != 2 || s.DelayedReplies != 1 || s.Commands["ECHO"] != 2 {
		t.Fatalf("injected %d, delayed %d, ECHO seen %d; want 2, 1, 2", s.InjectedErrors, s.DelayedReplies, s.Commands["ECHO"])
	}
}

func TestDelayReply(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	c := e.client(t)
	k := e.b.Key("k")
	if err := c.Set(ctx, k, "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	const d = 300 * time.Millisecond
	rule := e.p.Apply(faultproxy.DelayReply(faultproxy.Named("GET"), d, 1))
	start := time.Now()
	v, err := c.Get(ctx, k).Result()
	if took := time.Since(start); err != nil || v != "v" || took < d {
		t.Fatalf("GET = %q, %v after %v; want v after at least %v", v, err, took, d)
	}
	if s := e.p.Stats(); s.DelayedReplies != 1 || rule.Fired() != 1 || s.Commands["GET"] != 1 {
		t.Fatalf("delayed %d, fired %d, GET seen %d; want 1, 1, 1", s.DelayedReplies, rule.Fired(), s.Commands["GET"])
	}
}

func TestDelayedReplyTimesOutAndIsResent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	c := e.client(t, func(o *redis.Options) { o.ReadTimeout = 200 * time.Millisecond })
	k := e.b.Key("n")
	e.p.Apply(faultproxy.DelayReply(faultproxy.Named("INCR"), 5*time.Second, 1))
	start := time.Now()
	// The first INCR runs but its reply comes too late: go-redis times out,
	// drops the connection and re-sends it, so it runs twice.
	v, err := c.Incr(ctx, k).Result()
	if took := time.Since(start); err != nil || v != 2 || took < 200*time.Millisecond {
		t.Fatalf("INCR = %d, %v after %v; want 2 after at least 200ms", v, err, took)
	}
	if n := e.p.Stats().Commands["INCR"]; n != 2 {
		t.Fatalf("INCR seen %d times, want 2", n)
	}
}

func TestDelayCommand(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	c := e.client(t)
	k := e.b.Key("k")
	const d = time.Second
	e.p.Apply(faultproxy.DelayCommand(faultproxy.Named("SET"), d, 1))
	start := time.Now()
	res := make(chan error, 1)
	go func() { res <- c.Set(ctx, k, "v", 0).Err() }()
	// Wait until the proxy holds the SET, then look: not run yet.
	for e.p.Stats().DelayedCommands == 0 {
		if time.Since(start) > 5*time.Second {
			t.Fatal("the SET never reached the proxy")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if v := e.get(t, k); v != "" && time.Since(start) < d {
		t.Fatalf("server has %q while the SET is held", v)
	}
	if err := <-res; err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < d {
		t.Fatalf("SET took %v, want at least %v", took, d)
	}
	if v := e.get(t, k); v != "v" {
		t.Fatalf("server has %q after the SET, want v", v)
	}
}

func TestLatency(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	c := e.client(t)
	if err := c.Ping(ctx).Err(); err != nil { // connect first: the handshake is not measured
		t.Fatal(err)
	}
	timed := func(f func() error) time.Duration {
		t.Helper()
		start := time.Now()
		if err := f(); err != nil {
			t.Fatal(err)
		}
		return time.Since(start)
	}
	ping := func() error { return c.Ping(ctx).Err() }

	e.p.Latency(faultproxy.ToClient, 100*time.Millisecond, 50*time.Millisecond)
	for range 3 {
		if took := timed(ping); took < 100*time.Millisecond || took > 150*time.Millisecond+2*time.Second {
			t.Fatalf("PING with 100ms+50ms jitter reply latency took %v", took)
		}
	}
	e.p.Latency(faultproxy.Both, 100*time.Millisecond, 0)
	if took := timed(ping); took < 200*time.Millisecond {
		t.Fatalf("PING with 100ms each way took %v, want at least 200ms", took)
	}
	// Pipelined frames are delayed together, not one after the other.
	took := timed(func() error {
		_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for range 10 {
				p.Ping(ctx)
			}
			return nil
		})
		return err
	})
	if took < 200*time.Millisecond || took > 1500*time.Millisecond {
		t.Fatalf("10 pipelined PINGs with 100ms each way took %v, want 200ms (well under 10 x 200ms)", took)
	}
	e.p.Latency(faultproxy.Both, 0, 0)
}

func TestBlackHoleReplies(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	c := e.client(t, noRetries, func(o *redis.Options) { o.ReadTimeout = 200 * time.Millisecond })
	k := e.b.Key("k")
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	e.p.BlackHole(faultproxy.ToClient)
	start := time.Now()
	err := c.Set(ctx, k, "v", 0).Err()
	if took := time.Since(start); !isTimeout(err) || took < 200*time.Millisecond {
		t.Fatalf("SET = %v after %v; want a timeout after at least 200ms", err, took)
	}
	if v := e.get(t, k); v != "v" {
		t.Fatalf("server has %q, want v: commands still get through", v)
	}
	e.p.Restore()
	if v, err := c.Get(ctx, k).Result(); err != nil || v != "v" {
		t.Fatalf("GET after Restore = %q, %v", v, err)
	}
}

func TestBlackHoledCommandsAreDeliveredOnRestore(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	c := e.client(t, noRetries, func(o *redis.Options) { o.ReadTimeout = 200 * time.Millisecond })
	k := e.b.Key("k")
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	e.p.BlackHole(faultproxy.ToServer)
	if err := c.Set(ctx, k, "v", 0).Err(); !isTimeout(err) {
		t.Fatalf("SET = %v, want a timeout", err)
	}
	if v := e.get(t, k); v != "" {
		t.Fatalf("server has %q while the SET is held", v)
	}
	// As TCP after a partition heals: the held SET arrives late, although
	// the client gave up on it.
	e.p.Restore()
	deadline := time.Now().Add(5 * time.Second)
	for e.get(t, k) != "v" {
		if time.Now().After(deadline) {
			t.Fatal("the held SET never arrived after Restore")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestCutBeforeRestoreDiscardsHeldCommands(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	c := e.client(t, noRetries, func(o *redis.Options) { o.ReadTimeout = 200 * time.Millisecond })
	k := e.b.Key("k")
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	e.p.BlackHole(faultproxy.ToServer)
	if err := c.Set(ctx, k, "v", 0).Err(); !isTimeout(err) {
		t.Fatalf("SET = %v, want a timeout", err)
	}
	if n := e.p.CutAll(faultproxy.RST); n != 1 {
		t.Fatalf("CutAll = %d, want 1", n)
	}
	e.p.Restore()
	if err := c.Set(ctx, e.b.Key("after"), "x", 0).Err(); err != nil {
		t.Fatalf("SET after Restore: %v", err)
	}
	if v := e.get(t, k); v != "" {
		t.Fatalf("server has %q: the held SET should have been discarded by the cut", v)
	}
}

func TestRefuse(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.p.Refuse(time.Minute)
	c := e.client(t, noRetries)
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("PING through a refusing proxy succeeded")
	}
	// The kernel completes the handshake before the proxy resets the
	// connection: the reset shows at the first read, or already at the dial
	// when it arrives that fast.
	nc, err := net.Dial("tcp", e.p.Addr())
	if err == nil {
		defer nc.Close()
		_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err = nc.Read(make([]byte, 1))
	}
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("dial and read of a refused connection: %v, want connection reset", err)
	}
	s := e.p.Stats()
	if s.Refused < 2 || s.Accepted != 0 {
		t.Fatalf("%d refused, %d accepted; want at least 2, 0", s.Refused, s.Accepted)
	}
	e.p.Refuse(0)
	if err := e.client(t).Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after Refuse(0): %v", err)
	}
	e.p.Refuse(time.Minute)
	e.p.Restore()
	if err := e.client(t).Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after Restore: %v", err)
	}
}

func TestAfterSkipsTheFirstMatches(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	c := e.client(t, noRetries)
	e.p.Apply(faultproxy.DropReply(faultproxy.Named("SET"), 1).After(2))
	var failed []int
	for i := 1; i <= 4; i++ {
		if err := c.Set(ctx, e.b.Key(strconv.Itoa(i)), "v", 0).Err(); err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatalf("SET %d = %v, want nil or EOF", i, err)
			}
			failed = append(failed, i)
		}
	}
	if !slices.Equal(failed, []int{3}) {
		t.Fatalf("failed SETs %v, want [3]", failed)
	}
	for i := 1; i <= 4; i++ {
		if v := e.get(t, e.b.Key(strconv.Itoa(i))); v != "v" {
			t.Fatalf("key %d = %q, want v (all ran)", i, v)
		}
	}
	ev := e.p.Events()
	if len(ev) != 1 || ev[0].Kind != faultproxy.KindDropReply || ev[0].Command.Name() != "SET" ||
		ev[0].Command.Args[1] != e.b.Key("3") {
		t.Fatalf("events %+v, want one drop-reply for SET %s", ev, e.b.Key("3"))
	}
}

func TestScriptSHA(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	c := e.client(t)
	k := e.b.Key("n")
	incr := redis.NewScript("return redis.call('INCR', KEYS[1])")
	if v, err := incr.Run(ctx, c, []string{k}).Int(); err != nil || v != 1 {
		t.Fatalf("first run = %d, %v", v, err)
	}
	evalsha := e.p.Stats().Commands["EVALSHA"]
	// A lost reply to the cached script: it runs, go-redis re-sends it, it
	// runs again.
	drop := e.p.Apply(faultproxy.DropReply(faultproxy.ScriptSHA(incr.Hash()), 1))
	if v, err := incr.Run(ctx, c, []string{k}).Int(); err != nil || v != 3 {
		t.Fatalf("run through a lost reply = %d, %v; want 3 (ran twice)", v, err)
	}
	if n := e.p.Stats().Commands["EVALSHA"] - evalsha; n != 2 || drop.Fired() != 1 {
		t.Fatalf("EVALSHA seen %d more times, fired %d; want 2, 1", n, drop.Fired())
	}
	// EVAL with the script's body matches the same SHA.
	e.p.Apply(faultproxy.ErrorReply(faultproxy.ScriptSHA(incr.Hash()), "ERR injected", false, 1))
	if err := incr.Eval(ctx, c, []string{k}).Err(); err == nil || err.Error() != "ERR injected" {
		t.Fatalf("EVAL = %v, want ERR injected", err)
	}
	// Another script does not.
	e.p.Apply(faultproxy.ErrorReply(faultproxy.ScriptSHA(incr.Hash()), "ERR injected", false, faultproxy.Forever))
	if v, err := redis.NewScript("return 7").Run(ctx, c, nil).Int(); err != nil || v != 7 {
		t.Fatalf("other script = %d, %v; want 7", v, err)
	}
	if v := e.get(t, k); v != "3" {
		t.Fatalf("server has %s, want 3", v)
	}
}

func TestPubSub(t *testing.T) {
	t.Parallel()
	for _, proto := range []int{2, 3} {
		t.Run("RESP"+strconv.Itoa(proto), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			ctx := context.Background()
			c := e.client(t, func(o *redis.Options) { o.Protocol = proto })
			ch1, ch2 := e.b.Key("ch1"), e.b.Key("ch2")
			ps := c.Subscribe(ctx, ch1)
			defer ps.Close()
			receive := func(channel, payload string) {
				t.Helper()
				m, err := ps.ReceiveMessage(ctx)
				if err != nil || m.Channel != channel || m.Payload != payload {
					t.Fatalf("message = %+v, %v; want %q on %s", m, err, payload, channel)
				}
			}
			if _, err := ps.Receive(ctx); err != nil { // the subscription's confirmation
				t.Fatal(err)
			}
			if err := e.direct.Publish(ctx, ch1, "hello").Err(); err != nil {
				t.Fatal(err)
			}
			receive(ch1, "hello")

			// The subscribed connection is not paired: rules leave it alone.
			rule := e.p.Apply(faultproxy.ErrorReply(faultproxy.Any(), "ERR injected", false, faultproxy.Forever))
			if err := ps.Subscribe(ctx, ch2); err != nil {
				t.Fatal(err)
			}
			if _, err := ps.Receive(ctx); err != nil {
				t.Fatal(err)
			}
			if err := e.direct.Publish(ctx, ch2, "again").Err(); err != nil {
				t.Fatal(err)
			}
			receive(ch2, "again")
			if rule.Fired() != 0 || e.p.Stats().Commands["SUBSCRIBE"] != 2 {
				t.Fatalf("fired %d, SUBSCRIBE seen %d; want 0, 2", rule.Fired(), e.p.Stats().Commands["SUBSCRIBE"])
			}
			rule.Remove()

			// But black-holes apply: the message waits until Restore.
			e.p.BlackHole(faultproxy.ToClient)
			if err := e.direct.Publish(ctx, ch1, "held").Err(); err != nil {
				t.Fatal(err)
			}
			if m, err := ps.ReceiveTimeout(ctx, 300*time.Millisecond); !isTimeout(err) {
				t.Fatalf("receive while black-holed = %v, %v; want a timeout", m, err)
			}
			e.p.Restore()
			receive(ch1, "held")
		})
	}
}

func TestProtocols(t *testing.T) {
	testharness.ForEach(t, func(t *testing.T, b *testharness.Backend) {
		for _, proto := range []int{2, 3} {
			t.Run("RESP"+strconv.Itoa(proto), func(t *testing.T) {
				p := faultproxy.Start(t, b.Server.Addr)
				o := b.Server.Options()
				o.Addr, o.Protocol = p.Addr(), proto
				c := redis.NewClient(o)
				defer c.Close()
				checkProtocol(t, b, p, c, proto)
			})
		}
	}, testharness.RealOnly(), testharness.StandaloneOnly())
}

func checkProtocol(t *testing.T, b *testharness.Backend, p *faultproxy.Proxy, c *redis.Client, proto int) {
	ctx := context.Background()
	key := func(k string) string { return b.Key("resp" + strconv.Itoa(proto) + ":" + k) }
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	h, s, z, f, k, big := key("h"), key("s"), key("z"), key("f"), key("k"), key("big")
	must(c.HSet(ctx, h, "a", "1", "b", "2").Err())
	if m, err := c.HGetAll(ctx, h).Result(); err != nil || len(m) != 2 || m["a"] != "1" || m["b"] != "2" {
		t.Fatalf("HGETALL = %v, %v", m, err)
	}
	must(c.SAdd(ctx, s, "x", "y").Err())
	if m, err := c.SMembers(ctx, s).Result(); err != nil || !slices.Equal(slices.Sorted(slices.Values(m)), []string{"x", "y"}) {
		t.Fatalf("SMEMBERS = %v, %v", m, err)
	}
	must(c.ZAdd(ctx, z, redis.Z{Score: 1.5, Member: "m"}).Err())
	if v, err := c.ZScore(ctx, z, "m").Result(); err != nil || v != 1.5 {
		t.Fatalf("ZSCORE = %v, %v", v, err)
	}
	if v, err := c.IncrByFloat(ctx, f, 0.25).Result(); err != nil || v != 0.25 {
		t.Fatalf("INCRBYFLOAT = %v, %v", v, err)
	}
	if err := c.Get(ctx, key("missing")).Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("GET missing = %v, want redis.Nil", err)
	}
	tricky := "a\r\nb*1\r\n$3\r\n\x00"
	must(c.Set(ctx, k, tricky, 0).Err())
	if v, err := c.Get(ctx, k).Result(); err != nil || v != tricky {
		t.Fatalf("GET = %q, %v", v, err)
	}
	large := strings.Repeat("0123456789", 200_000)
	must(c.Set(ctx, big, large, 0).Err())
	if v, err := c.Get(ctx, big).Result(); err != nil || v != large {
		t.Fatalf("GET of 2 MB: %d bytes, %v", len(v), err)
	}
	if v, err := c.Eval(ctx, "return {1, 'two', {3, 'four'}}", nil).Slice(); err != nil ||
		fmt.Sprint(v) != "[1 two [3 four]]" {
		t.Fatalf("EVAL nested = %v, %v", v, err)
	}
	cmds, err := c.Pipelined(ctx, func(pl redis.Pipeliner) error {
		for range 100 {
			pl.Incr(ctx, key("n"))
		}
		return nil
	})
	if err != nil || cmds[99].(*redis.IntCmd).Val() != 100 {
		t.Fatalf("pipeline of 100 INCR: %v", err)
	}

	if proto == 3 {
		// Every RESP3 type, from the server itself.
		for _, tc := range []struct{ typ, want string }{
			{"bignum", "1234567999999999999999999999999999999"},
			{"double", "3.141"},
			{"true", "true"},
			{"false", "false"},
			{"verbatim", "This is a verbatim\nstring"},
			{"map", "map[0:false 1:true 2:false]"},
			{"set", "[0 1 2]"},
			{"attrib", "Some real reply following the attribute"},
			{"push", "Some real reply following the push reply"},
		} {
			v, err := c.Do(ctx, "DEBUG", "PROTOCOL", tc.typ).Result()
			if err != nil || fmt.Sprint(v) != tc.want {
				t.Fatalf("DEBUG PROTOCOL %s = %v, %v; want %s", tc.typ, v, err, tc.want)
			}
		}
		if err := c.Do(ctx, "DEBUG", "PROTOCOL", "null").Err(); !errors.Is(err, redis.Nil) {
			t.Fatalf("DEBUG PROTOCOL null = %v, want redis.Nil", err)
		}
		// A push or an attribute before a reply must not shift the pairing:
		// the error replaces exactly the ECHO replies.
		rule := p.Apply(faultproxy.ErrorReply(faultproxy.Named("ECHO"), "ERR injected", true, faultproxy.Forever))
		cmds, _ := c.Pipelined(ctx, func(pl redis.Pipeliner) error {
			pl.Do(ctx, "DEBUG", "PROTOCOL", "push")
			pl.Echo(ctx, "x")
			pl.Do(ctx, "DEBUG", "PROTOCOL", "attrib")
			pl.Echo(ctx, "y")
			pl.Ping(ctx)
			return nil
		})
		want := []string{"Some real reply following the push reply", "ERR injected",
			"Some real reply following the attribute", "ERR injected", "PONG"}
		if got := results(cmds); !slices.Equal(got, want) {
			t.Fatalf("pipeline = %q, want %q", got, want)
		}
		if rule.Fired() != 2 || p.Stats().ReplacedReplies != 2 {
			t.Fatalf("fired %d, replaced %d; want 2, 2", rule.Fired(), p.Stats().ReplacedReplies)
		}
		rule.Remove()
	}
	st := p.Stats()
	if st.ParseErrors != 0 || st.Commands["INCR"] != 100 || st.Commands["HELLO"] != st.Accepted {
		t.Fatalf("stats %+v, want no parse error, 100 INCR, one HELLO per connection", st)
	}
}

// results renders each command's value, or its error's text.
func results(cmds []redis.Cmder) []string {
	out := make([]string, len(cmds))
	for i, cmd := range cmds {
		switch c := cmd.(type) {
		case *redis.Cmd:
			out[i] = fmt.Sprint(c.Val())
		case *redis.StringCmd:
			out[i] = c.Val()
		case *redis.StatusCmd:
			out[i] = c.Val()
		case *redis.IntCmd:
			out[i] = strconv.FormatInt(c.Val(), 10)
		default:
			out[i] = fmt.Sprintf("%T", cmd)
		}
		if err := cmd.Err(); err != nil {
			out[i] = err.Error()
		}
	}
	return out
}
