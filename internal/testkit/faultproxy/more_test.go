package faultproxy_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/coordkit/coordination/internal/testkit/faultproxy"
)

func TestRandomFaultsAreReproducible(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	chances := faultproxy.Chances{DropReply: 0.1, ErrorInstead: 0.1, ErrorAfter: 0.1, DelayReply: 0.1,
		Error: "ERR injected", Delay: 5 * time.Millisecond}
	const n = 100
	type run struct {
		outcomes []string // what the client saw, per INCR
		kinds    []faultproxy.Kind
		stats    faultproxy.Stats
		value    string
	}
	do := func(name string, seed uint64) run {
		p := faultproxy.Start(t, e.b.Server.Addr)
		o := e.b.Server.Options()
		o.Addr, o.MaxRetries = p.Addr(), -1
		c := redis.NewClient(o)
		defer c.Close()
		p.Apply(faultproxy.Random(faultproxy.Named("INCR"), seed, chances))
		k := e.b.Key(name)
		var r run
		for range n {
			v, err := c.Incr(ctx, k).Result()
			switch {
			case errors.Is(err, io.EOF):
				r.outcomes = append(r.outcomes, "EOF")
			case err != nil:
				r.outcomes = append(r.outcomes, err.Error())
			default:
				r.outcomes = append(r.outcomes, fmt.Sprint(v))
			}
		}
		for _, ev := range p.Events() {
			r.kinds = append(r.kinds, ev.Kind)
		}
		r.stats, r.value = p.Stats(), e.get(t, k)
		return r
	}
	a, b, other := do("a", 42), do("b", 42), do("c", 43)
	if fmt.Sprint(a.outcomes) != fmt.Sprint(b.outcomes) || fmt.Sprint(a.kinds) != fmt.Sprint(b.kinds) {
		t.Fatalf("same seed, different runs:\n%v\n%v", a.outcomes, b.outcomes)
	}
	if fmt.Sprint(a.kinds) == fmt.Sprint(other.kinds) {
		t.Fatalf("seeds 42 and 43 gave the same faults: %v", a.kinds)
	}
	// The decisions match what the client saw and what the server did.
	for _, r := range []run{a, other} {
		count := map[faultproxy.Kind]int{}
		for _, k := range r.kinds {
			count[k]++
		}
		eofs, errs := 0, 0
		for _, o := range r.outcomes {
			switch o {
			case "EOF":
				eofs++
			case "ERR injected":
				errs++
			}
		}
		if count[faultproxy.KindDropReply] != eofs || count[faultproxy.KindErrorInstead]+count[faultproxy.KindErrorAfter] != errs {
			t.Fatalf("faults %v, but the client saw %d EOF and %d errors", count, eofs, errs)
		}
		if count[faultproxy.KindDropReply] == 0 || count[faultproxy.KindErrorInstead] == 0 ||
			count[faultproxy.KindErrorAfter] == 0 || count[faultproxy.KindDelayReply] == 0 {
			t.Fatalf("faults %v: with 100 draws at 10%% each, every kind should occur", count)
		}
		s := r.stats
		if s.DroppedReplies != count[faultproxy.KindDropReply] || s.InjectedErrors != count[faultproxy.KindErrorInstead] ||
			s.ReplacedReplies != count[faultproxy.KindErrorAfter] || s.DelayedReplies != count[faultproxy.KindDelayReply] ||
			s.Commands["INCR"] != n {
			t.Fatalf("stats %+v do not match faults %v", s, count)
		}
		if want := fmt.Sprint(n - count[faultproxy.KindErrorInstead]); r.value != want {
			t.Fatalf("server counted %s INCR, want %s (all but the ones not forwarded)", r.value, want)
		}
	}
}

func TestConcurrentClients(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	c := e.client(t, func(o *redis.Options) { o.PoolSize = 8 })
	k := e.b.Key("n")
	e.p.Apply(faultproxy.Random(faultproxy.Named("INCR"), 7,
		faultproxy.Chances{DropReply: 0.05, ErrorAfter: 0.05, DelayReply: 0.05, Delay: time.Millisecond}))
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok, failed := 0, 0
	for range 8 {
		wg.Go(func() {
			for range 50 {
				err := c.Incr(ctx, k).Err()
				mu.Lock()
				if err == nil {
					ok++
				} else {
					failed++
				}
				mu.Unlock()
			}
		})
	}
	// Poke at the proxy meanwhile, for the race detector.
	wg.Go(func() {
		for range 50 {
			_ = e.p.Stats()
			_ = e.p.Events()
			a := e.p.Apply(faultproxy.DelayReply(faultproxy.Named("NOPE"), time.Millisecond, 1))
			e.p.Latency(faultproxy.ToServer, 0, time.Millisecond)
			a.Remove()
		}
	})
	wg.Wait()
	s := e.p.Stats()
	// Every INCR attempt was forwarded and ran exactly once (drops close the
	// connection only once the reply is back), so the server's counter is
	// the number of attempts the proxy saw.
	if v := e.get(t, k); v != fmt.Sprint(s.Commands["INCR"]) {
		t.Fatalf("server counter %s, proxy saw %d INCR", v, s.Commands["INCR"])
	}
	if ok+failed != 400 || s.Commands["INCR"] < 400 || s.DroppedReplies+s.ReplacedReplies+s.DelayedReplies != len(e.p.Events()) {
		t.Fatalf("%d ok, %d failed, stats %+v, %d events", ok, failed, s, len(e.p.Events()))
	}
}

// rawConn dials the proxy and returns the connection with a helper that
// sends a request and reads exactly len(want) bytes.
func rawConn(t *testing.T, addr string) (net.Conn, func(req, want string)) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	return nc, func(req, want string) {
		t.Helper()
		if _, err := nc.Write([]byte(req)); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, len(want))
		if _, err := io.ReadFull(nc, buf); err != nil || string(buf) != want {
			t.Fatalf("%q: got %q, %v; want %q", req, buf, err, want)
		}
	}
}

func TestInlineCommands(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, roundTrip := rawConn(t, e.p.Addr())
	roundTrip("PING\r\n", "+PONG\r\n")
	roundTrip("ECHO hi\r\n", "$2\r\nhi\r\n")
	roundTrip("\r\nPING\r\n", "+PONG\r\n") // an empty line gets no reply
	e.p.Apply(faultproxy.ErrorReply(faultproxy.Named("ping"), "ERR injected", false, 1))
	roundTrip("PING\r\nPING\r\n", "-ERR injected\r\n+PONG\r\n")
	if s := e.p.Stats(); s.Commands["PING"] != 4 || s.Commands["ECHO"] != 1 || s.InjectedErrors != 1 {
		t.Fatalf("stats %+v", s)
	}
}

func TestUnparsableStreamIsPassedThrough(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	nc, roundTrip := rawConn(t, e.p.Addr())
	roundTrip("PING\r\n", "+PONG\r\n")
	// A bad bulk length: the proxy gives up parsing and forwards bytes, so
	// the client gets the server's own protocol error, then EOF.
	if _, err := nc.Write([]byte("*1\r\n$x\r\n")); err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(nc)
	if err != nil || !strings.HasPrefix(string(out), "-ERR Protocol error") {
		t.Fatalf("got %q, %v; want the server's protocol error then EOF", out, err)
	}
	if s := e.p.Stats(); s.ParseErrors != 1 {
		t.Fatalf("%d parse errors, want 1", s.ParseErrors)
	}
}

func TestClear(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	rules := []*faultproxy.Applied{
		e.p.Apply(faultproxy.DropReply(faultproxy.Any(), faultproxy.Forever)),
		e.p.Apply(faultproxy.ErrorReply(faultproxy.Any(), "ERR injected", false, 3)),
	}
	e.p.Latency(faultproxy.Both, time.Hour, 0)
	e.p.BlackHole(faultproxy.Both)
	e.p.Refuse(time.Hour)
	e.p.Clear()
	for i, r := range rules {
		select {
		case <-r.Done():
		default:
			t.Fatalf("rule %d still installed after Clear", i)
		}
	}
	if err := e.client(t).Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after Clear: %v", err)
	}
	if s := e.p.Stats(); s.DroppedReplies+s.InjectedErrors+s.Refused != 0 || len(e.p.Events()) != 0 {
		t.Fatalf("faults after Clear: %+v", s)
	}
}

func TestCloseWhileBusy(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	p, err := faultproxy.New(e.b.Server.Addr)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1, ReadTimeout: 100 * time.Millisecond})
	defer c.Close()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	// Things held everywhere: a delayed command, black-holed replies, an
	// idle raw connection.
	p.Apply(faultproxy.DelayCommand(faultproxy.Named("GET"), time.Hour, 1))
	_ = c.Get(ctx, e.b.Key("k")).Err()
	p.BlackHole(faultproxy.ToClient)
	_ = c.Ping(ctx).Err()
	nc, _ := rawConn(t, p.Addr())

	closed := make(chan struct{})
	go func() { _ = p.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return")
	}
	if _, err := nc.Read(make([]byte, 1)); err == nil {
		t.Fatal("a raw connection survived Close")
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
	a := p.Apply(faultproxy.DropReply(faultproxy.Any(), 1))
	select {
	case <-a.Done():
	default:
		t.Fatal("a rule applied to a closed proxy is not done")
	}
	if _, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		t.Fatal("a closed proxy still accepts connections")
	}
	// The leak check of TestMain (testharness.Main) checks that every
	// goroutine of p returned.
}

func TestDialErrors(t *testing.T) {
	t.Parallel()
	// A port nothing listens on: take one, then free it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	_ = ln.Close()
	p := faultproxy.Start(t, dead)
	c := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1})
	defer c.Close()
	if err := c.Ping(context.Background()).Err(); err == nil {
		t.Fatal("PING through a proxy to nothing succeeded")
	}
	if s := p.Stats(); s.DialErrors == 0 || s.Accepted != 0 {
		t.Fatalf("%d dial errors, %d accepted; want some, 0", s.DialErrors, s.Accepted)
	}
}

func TestMatchers(t *testing.T) {
	cmd := func(args ...string) faultproxy.Command { return faultproxy.Command{Args: args, Conn: 1} }
	body := "return 1"
	const sha = "e0e1f9fabfc9d4800c877a703b823ac0578ff8db" // SHA1("return 1")
	for _, c := range []struct {
		name string
		m    faultproxy.Match
		cmd  faultproxy.Command
		want bool
	}{
		{"any", faultproxy.Any(), cmd("hello", "3"), true},
		{"named, any case", faultproxy.Named("set"), cmd("SeT", "k", "v"), true},
		{"named, other", faultproxy.Named("SET", "GET"), cmd("DEL", "k"), false},
		{"scripts evalsha_ro", faultproxy.Scripts(), cmd("evalsha_ro", sha, "0"), true},
		{"scripts fcall", faultproxy.Scripts(), cmd("FCALL", "f", "0"), false},
		{"sha by evalsha", faultproxy.ScriptSHA(strings.ToUpper(sha)), cmd("EVALSHA", sha, "0"), true},
		{"sha by eval body", faultproxy.ScriptSHA(sha), cmd("eval", body, "0"), true},
		{"sha other body", faultproxy.ScriptSHA(sha), cmd("EVAL", "return 2", "0"), false},
		{"sha other command", faultproxy.ScriptSHA(sha), cmd("GET", sha), false},
		{"sha no args", faultproxy.ScriptSHA(sha), cmd("EVALSHA"), false},
		{"arg", faultproxy.Arg("k"), cmd("SET", "k", "v"), true},
		{"arg not the name", faultproxy.Arg("SET"), cmd("SET", "k", "v"), false},
		{"all", faultproxy.All(faultproxy.Named("SET"), faultproxy.Arg("k")), cmd("SET", "k", "v"), true},
		{"all, one fails", faultproxy.All(faultproxy.Named("SET"), faultproxy.Arg("x")), cmd("SET", "k", "v"), false},
	} {
		if got := c.m(c.cmd); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	if n := cmd("evalSHA").Name(); n != "EVALSHA" {
		t.Errorf("Name = %q", n)
	}
	if s := faultproxy.KindErrorAfter.String(); s != "error-after" {
		t.Errorf("KindErrorAfter = %q", s)
	}
}

func TestInvalidArgumentsPanic(t *testing.T) {
	p, err := faultproxy.New("127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for name, f := range map[string]func(){
		"nil match":           func() { faultproxy.DropReply(nil, 1) },
		"zero count":          func() { faultproxy.DropReply(faultproxy.Any(), 0) },
		"zero delay":          func() { faultproxy.DelayReply(faultproxy.Any(), 0, 1) },
		"negative delay":      func() { faultproxy.DelayCommand(faultproxy.Any(), -time.Second, 1) },
		"empty error":         func() { faultproxy.ErrorReply(faultproxy.Any(), "", true, 1) },
		"two-line error":      func() { faultproxy.ErrorReply(faultproxy.Any(), "ERR a\r\nb", true, 1) },
		"negative After":      func() { faultproxy.DropReply(faultproxy.Any(), 1).After(-1) },
		"chance above 1":      func() { faultproxy.Random(faultproxy.Any(), 1, faultproxy.Chances{DropReply: 1.5}) },
		"chances sum above 1": func() { faultproxy.Random(faultproxy.Any(), 1, faultproxy.Chances{DropReply: .6, ErrorAfter: .6}) },
		"delay without Delay": func() { faultproxy.Random(faultproxy.Any(), 1, faultproxy.Chances{DelayReply: .5}) },
		"zero Rule":           func() { p.Apply(faultproxy.Rule{}) },
		"negative latency":    func() { p.Latency(faultproxy.Both, -time.Second, 0) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}
