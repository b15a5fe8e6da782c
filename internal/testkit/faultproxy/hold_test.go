package faultproxy_test

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/coordkit/coordination/internal/testkit/faultproxy"
)

// waitAnswered waits until every command a holding rule held has been
// answered by the server.
func waitAnswered(t *testing.T, a *faultproxy.Applied) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); a.Answered() < a.Fired(); {
		if time.Now().After(deadline) {
			t.Fatalf("held commands answered: %d of %d", a.Answered(), a.Fired())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A held request reaches the server only once the test lets it through,
// although its client gave up (a read timeout closed its connection)
// long before: a late request.
func TestHoldCommandOutlivesItsClient(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	c := e.client(t, noRetries, func(o *redis.Options) { o.ReadTimeout = 100 * time.Millisecond })
	k := e.b.Key("k")
	held := e.p.Apply(faultproxy.HoldCommand(faultproxy.Named("SET"), 1))
	if err := c.Set(ctx, k, "late", 0).Err(); !isTimeout(err) {
		t.Fatalf("SET = %v, want a read timeout", err)
	}
	if held.Fired() != 1 || e.p.Stats().DelayedCommands != 1 {
		t.Fatalf("held %d, delayed %d; want 1 and 1", held.Fired(), e.p.Stats().DelayedCommands)
	}
	// The client is gone (go-redis closed the timed-out connection), the
	// server has not seen the SET.
	time.Sleep(300 * time.Millisecond)
	if v := e.get(t, k); v != "" {
		t.Fatalf("server has %q while the SET is held", v)
	}
	if held.Answered() != 0 {
		t.Fatalf("Answered = %d before Let", held.Answered())
	}
	held.Let()
	waitAnswered(t, held)
	if v := e.get(t, k); v != "late" {
		t.Fatalf("server has %q after Let, want late", v)
	}
	held.Let() // harmless
	// The client works on (a new connection).
	if err := c.Set(ctx, k, "next", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if v := e.get(t, k); v != "next" {
		t.Fatalf("server has %q, want next", v)
	}
}

// A held request is delivered even when its client reset the connection
// (RST), and the commands behind it on that connection follow it in order;
// CutAll discards what is held.
func TestHoldCommandAfterReset(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	k1, k2 := e.b.Key("a"), e.b.Key("b")
	held := e.p.Apply(faultproxy.HoldCommand(faultproxy.Arg(k1), 1))
	nc, _ := rawConn(t, e.p.Addr())
	req := "*3\r\n$3\r\nSET\r\n$" + strconv.Itoa(len(k1)) + "\r\n" + k1 + "\r\n$1\r\n1\r\n" +
		"*3\r\n$3\r\nSET\r\n$" + strconv.Itoa(len(k2)) + "\r\n" + k2 + "\r\n$1\r\n2\r\n"
	if _, err := nc.Write([]byte(req)); err != nil {
		t.Fatal(err)
	}
	for held.Fired() == 0 || e.p.Stats().Commands["SET"] < 2 {
		time.Sleep(5 * time.Millisecond)
	}
	_ = nc.(*net.TCPConn).SetLinger(0)
	_ = nc.Close()
	time.Sleep(100 * time.Millisecond)
	if v1, v2 := e.get(t, k1), e.get(t, k2); v1 != "" || v2 != "" {
		t.Fatalf("server has %q, %q while held", v1, v2)
	}
	held.Let()
	waitAnswered(t, held)
	for deadline := time.Now().Add(5 * time.Second); e.get(t, k2) != "2"; {
		if time.Now().After(deadline) {
			t.Fatalf("the command behind the held one never arrived: %q", e.get(t, k2))
		}
		time.Sleep(5 * time.Millisecond)
	}
	if v := e.get(t, k1); v != "1" {
		t.Fatalf("server has %q, want 1", v)
	}

	// CutAll drops what is held.
	k3 := e.b.Key("c")
	dropped := e.p.Apply(faultproxy.HoldCommand(faultproxy.Arg(k3), 1))
	nc2, _ := rawConn(t, e.p.Addr())
	if _, err := nc2.Write([]byte("*3\r\n$3\r\nSET\r\n$" + strconv.Itoa(len(k3)) + "\r\n" + k3 + "\r\n$1\r\n3\r\n")); err != nil {
		t.Fatal(err)
	}
	for dropped.Fired() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	if n := e.p.CutAll(faultproxy.RST); n < 1 {
		t.Fatalf("CutAll = %d", n)
	}
	dropped.Let()
	time.Sleep(200 * time.Millisecond)
	if v := e.get(t, k3); v != "" || dropped.Answered() != 0 {
		t.Fatalf("a command held at CutAll ran: %q, answered %d", v, dropped.Answered())
	}
}

// A delayed command also outlives its client: it runs at its time.
func TestDelayCommandOutlivesItsClient(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	c := e.client(t, noRetries, func(o *redis.Options) { o.ReadTimeout = 100 * time.Millisecond })
	k := e.b.Key("k")
	d := e.p.Apply(faultproxy.DelayCommand(faultproxy.Named("SET"), 500*time.Millisecond, 1))
	if err := c.Set(ctx, k, "late", 0).Err(); !isTimeout(err) {
		t.Fatalf("SET = %v, want a read timeout", err)
	}
	if v := e.get(t, k); v != "" {
		t.Fatalf("server has %q before the delay passed", v)
	}
	waitAnswered(t, d)
	if v := e.get(t, k); v != "late" {
		t.Fatalf("server has %q, want late", v)
	}
}

// Close discards held commands and returns.
func TestCloseDiscardsHeldCommands(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p, err := faultproxy.New(e.b.Server.Addr)
	if err != nil {
		t.Fatal(err)
	}
	k := e.b.Key("k")
	held := p.Apply(faultproxy.HoldCommand(faultproxy.Arg(k), 1))
	nc, _ := rawConn(t, p.Addr())
	if _, err := nc.Write([]byte("*3\r\n$3\r\nSET\r\n$" + strconv.Itoa(len(k)) + "\r\n" + k + "\r\n$1\r\n1\r\n")); err != nil {
		t.Fatal(err)
	}
	for held.Fired() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	_ = nc.(*net.TCPConn).SetLinger(0)
	_ = nc.Close() // the connection lingers for its held command
	time.Sleep(50 * time.Millisecond)
	done := make(chan struct{})
	go func() { _ = p.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return")
	}
	held.Let()
	time.Sleep(100 * time.Millisecond)
	if v := e.get(t, k); v != "" {
		t.Fatalf("a command held at Close ran: %q", v)
	}
}
