package engine_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/engine"
	"github.com/coordkit/coordination/internal/testkit/faultproxy"
	"github.com/coordkit/coordination/internal/testkit/testharness"
	"github.com/coordkit/coordination/lock"
)

// asInt reads an integer reply.
func asInt(v any) (int64, bool) { n, ok := v.(int64); return n, ok }

// incr is a consumptive test script: each run adds one to its key.
var incr = engine.OwnScript("test_incr", "return redis.call('INCR', KEYS[1])", asInt)

// onceIncr is incr sent at most once.
var onceIncr = engine.OwnScript("test_incr_once", "return redis.call('INCR', KEYS[1]) -- once", asInt).Once()

// proxied returns an engine on a client through a fault proxy in front of
// backend flavor's server, the proxy, and a direct client; opts adjust the
// proxied client's options.
func proxied(t *testing.T, flavor string, opts func(*redis.Options)) (*engine.Engine, *faultproxy.Proxy, *redis.Client, string) {
	t.Helper()
	b := testharness.Get(t, flavor)
	direct := b.Client(t).(*redis.Client)
	p := faultproxy.Start(t, direct.Options().Addr)
	opt := sameServer(direct, p)
	if opts != nil {
		opts(opt)
	}
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { _ = rdb.Close() })
	coord, err := coordination.New(rdb, coordination.WithKeyPrefix(b.Prefix()))
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.Of(coord)
	if err != nil {
		t.Fatal(err)
	}
	return e, p, direct, b.Prefix()
}

// sameServer returns new options for a client of direct's server through
// p (the same credentials and protocol).
func sameServer(direct *redis.Client, p *faultproxy.Proxy) *redis.Options {
	o := direct.Options()
	return &redis.Options{Addr: p.Addr(), Username: o.Username, Password: o.Password, Protocol: o.Protocol, DB: o.DB}
}

// counter reads the test key's value on the server.
func counter(t *testing.T, direct *redis.Client, key string) int64 {
	t.Helper()
	n, err := direct.Get(context.Background(), key).Int64()
	if err != nil && !errors.Is(err, redis.Nil) {
		t.Fatal(err)
	}
	return n
}

var sendFlavors = []string{"miniredis", "redis7", "valkey9"}

// A consumptive script whose reply is lost after the server ran it (the
// proxy drops the reply and closes the connection) is not re-sent: it ran
// once, and the caller gets an error that IsAmbiguous reports as possibly
// applied. The same script without Once is re-sent by go-redis and runs
// twice: what Once is for.
func TestOnceScriptLostReplyRunsOnce(t *testing.T) {
	for _, flavor := range sendFlavors {
		t.Run(flavor, func(t *testing.T) {
			ctx := context.Background()
			e, p, direct, prefix := proxied(t, flavor, nil)
			for _, s := range []*engine.Script[int64]{onceIncr, incr} {
				if err := s.Load(ctx, e); err != nil {
					t.Fatal(err)
				}
			}
			lost := p.Apply(faultproxy.DropReply(faultproxy.ScriptSHA(onceIncr.Hash()), 1))
			_, err := onceIncr.Run(ctx, e, e.Key("once"))
			if err == nil || !coordination.IsAmbiguous(err) {
				t.Fatalf("once script, reply lost: %v; want an ambiguous error", err)
			}
			if lost.Fired() != 1 || p.Stats().Commands["EVALSHA"] != 1 {
				t.Fatalf("fired %d, EVALSHA sent %d times; want the one send", lost.Fired(), p.Stats().Commands["EVALSHA"])
			}
			if n := counter(t, direct, prefix+"once"); n != 1 {
				t.Fatalf("the once script ran %d times, want 1", n)
			}
			p.Apply(faultproxy.DropReply(faultproxy.ScriptSHA(incr.Hash()), 1))
			if n, err := incr.Run(ctx, e, e.Key("twice")); err != nil || n != 2 {
				t.Fatalf("plain script, reply lost: %d, %v; want 2 from go-redis' re-send", n, err)
			}
			if n := counter(t, direct, prefix+"twice"); n != 2 {
				t.Fatalf("the plain script ran %d times, want 2", n)
			}
		})
	}
}

// A read timeout (the reply comes after the client stopped waiting) is
// not re-sent either, with go-redis' default of re-sending on timeouts.
func TestOnceScriptReadTimeoutRunsOnce(t *testing.T) {
	for _, flavor := range sendFlavors {
		t.Run(flavor, func(t *testing.T) {
			ctx := context.Background()
			e, p, direct, prefix := proxied(t, flavor, func(o *redis.Options) { o.ReadTimeout = 200 * time.Millisecond })
			if err := onceIncr.Load(ctx, e); err != nil {
				t.Fatal(err)
			}
			p.Apply(faultproxy.DelayReply(faultproxy.ScriptSHA(onceIncr.Hash()), time.Second, 1))
			_, err := onceIncr.Run(ctx, e, e.Key("slow"))
			if err == nil || !coordination.IsAmbiguous(err) {
				t.Fatalf("once script, reply late: %v; want an ambiguous error", err)
			}
			if got := p.Stats().Commands["EVALSHA"]; got != 1 {
				t.Fatalf("EVALSHA sent %d times, want 1", got)
			}
			if n := counter(t, direct, prefix+"slow"); n != 1 {
				t.Fatalf("the once script ran %d times, want 1", n)
			}
		})
	}
}

// What provably did not run is sent again by the engine, within the
// client's MaxRetries: a connection reset before the command was written
// (the proxy refuses connections for a while). It then runs once. An
// error reply to a written command is no proof (a proxy may send LOADING
// in place of the reply of a command the server ran, as here): it is not
// sent again, and the caller's error is ambiguous.
func TestOnceScriptRetriesWhatDidNotRun(t *testing.T) {
	for _, flavor := range sendFlavors {
		t.Run(flavor, func(t *testing.T) {
			ctx := context.Background()
			e, p, direct, prefix := proxied(t, flavor, func(o *redis.Options) {
				o.MaxRetries, o.MinRetryBackoff, o.MaxRetryBackoff = 8, 50*time.Millisecond, 100*time.Millisecond
			})
			if err := onceIncr.Load(ctx, e); err != nil {
				t.Fatal(err)
			}
			p.Apply(faultproxy.ErrorReply(faultproxy.ScriptSHA(onceIncr.Hash()), faultproxy.Loading, true, 1))
			if _, err := onceIncr.Run(ctx, e, e.Key("loading")); err == nil || !coordination.IsAmbiguous(err) {
				t.Fatalf("LOADING in place of the reply: %v; want an ambiguous error", err)
			}
			if got := p.Stats().Commands["EVALSHA"]; got != 1 {
				t.Fatalf("EVALSHA sent %d times, want 1", got)
			}
			if n := counter(t, direct, prefix+"loading"); n != 1 {
				t.Fatalf("ran %d times, want 1 (the server ran it once)", n)
			}
			p.CutAll(faultproxy.RST)
			p.Refuse(150 * time.Millisecond)
			if n, err := onceIncr.Run(ctx, e, e.Key("refused")); err != nil || n != 1 {
				t.Fatalf("through refused connections: %d, %v; want 1", n, err)
			}
			if n := counter(t, direct, prefix+"refused"); n != 1 {
				t.Fatalf("ran %d times, want 1", n)
			}
			if st := p.Stats(); st.Refused == 0 {
				t.Fatalf("no connection was refused (%+v): the test did not test", st)
			}
		})
	}
}

// A lock released through a lost reply: go-redis re-sends the release,
// whose second send finds the key gone; the engine counted the two writes
// and the lock was held when Release began, so Release reports Released,
// and no key is left behind (no release mark any more).
func TestReleaseLostReplyIsReleased(t *testing.T) {
	for _, flavor := range sendFlavors {
		t.Run(flavor, func(t *testing.T) {
			ctx := context.Background()
			b := testharness.Get(t, flavor)
			direct := b.Client(t).(*redis.Client)
			p := faultproxy.Start(t, direct.Options().Addr)
			rdb := redis.NewClient(sameServer(direct, p))
			defer rdb.Close()
			coord, err := coordination.New(rdb, coordination.WithKeyPrefix(b.Prefix()))
			if err != nil {
				t.Fatal(err)
			}
			mu, err := lock.New(coord, "job")
			if err != nil {
				t.Fatal(err)
			}
			for i := range 2 { // the first round loads the script
				l, err := mu.TryAcquire(ctx, time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				before := p.Stats().Commands
				lost := p.Apply(faultproxy.DropReply(faultproxy.Scripts(), 1))
				out, err := l.Release(ctx)
				if err != nil || out != coordination.Released {
					t.Fatalf("round %d: Release = %v, %v; want Released", i, out, err)
				}
				after := p.Stats().Commands
				if sends := after["EVALSHA"] + after["EVAL"] - before["EVALSHA"] - before["EVAL"]; lost.Fired() != 1 || sends < 2 {
					t.Fatalf("round %d: fired %d, script sent %d times; want a lost reply and a re-send", i, lost.Fired(), sends)
				}
				if n, err := direct.Exists(ctx, b.Key("job")).Result(); err != nil || n != 0 {
					t.Fatalf("EXISTS after the release = %d, %v; want no key", n, err)
				}
				if keys, err := direct.Keys(ctx, b.Prefix()+"*").Result(); err != nil || len(keys) != 0 {
					t.Fatalf("keys left under the prefix: %q, %v; want none", keys, err)
				}
			}
		})
	}
}

// After Shutdown a script or command sends nothing: ErrClosed (what a
// batched limiter's give-back on Close met after the coordinator's
// Shutdown had sent, found by a new user's try).
func TestNothingIsSentAfterShutdown(t *testing.T) {
	b := testharness.Get(t, "miniredis")
	client := b.Client(t)
	coord, err := coordination.New(client, coordination.WithKeyPrefix(b.Prefix()))
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.Of(coord)
	if err != nil {
		t.Fatal(err)
	}
	if err := coord.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	k := testharness.CountCommands(client)
	for _, s := range []*engine.Script[int64]{onceIncr, incr} {
		if _, err := s.Run(context.Background(), e, e.Key("after")); !errors.Is(err, coordination.ErrClosed) {
			t.Errorf("%s after Shutdown: %v, want ErrClosed", s.Name(), err)
		}
	}
	if got := k.Names(); len(got) != 0 {
		t.Fatalf("sent after Shutdown: %v", got)
	}
}

// readRaw takes a nil, strings and integers in RESP2 and RESP3, and
// leaves everything else (error replies first) to the usual path.
func TestReadRaw(t *testing.T) {
	for _, c := range []struct {
		in   string
		want any
		ok   bool
	}{
		{"_\r\n", nil, true},
		{"$-1\r\n", nil, true},
		{"+OK\r\n", "OK", true},
		{":42\r\n", int64(42), true},
		{":-7\r\n", int64(-7), true},
		{"$5\r\nhello\r\n", "hello", true},
		{"$0\r\n\r\n", "", true},
		{"$7\r\na\r\nb+cd\r\n", "a\r\nb+cd", true},
		{"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n", nil, false},
		{"-MOVED 3999 127.0.0.1:6381\r\n", nil, false},
		{"!21\r\nSYNTAX invalid syntax\r\n", nil, false},
		{"*1\r\n:1\r\n", nil, false},
		{"$5\r\nhel\r\n", nil, false},
		{"$x\r\nhello\r\n", nil, false},
		{":x\r\n", nil, false},
		{"+OK", nil, false},
		{"", nil, false},
	} {
		got, ok := engine.ReadRaw([]byte(c.in))
		if ok != c.ok || (ok && got != c.want) {
			t.Errorf("readRaw(%q) = %#v, %v; want %#v, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}
