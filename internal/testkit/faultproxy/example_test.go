package faultproxy_test

import (
	"context"
	"fmt"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/coordkit/coordination/internal/testkit/faultproxy"
)

// A lost reply and a LOADING error, seen by a go-redis client. The target
// here is an embedded miniredis so that the example always runs; the tests
// put the proxy in front of real servers (testharness.StartStandalone).
func Example() {
	srv, err := miniredis.Run()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()
	p, err := faultproxy.New(srv.Addr())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close()
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr()})
	defer rdb.Close()
	ctx := context.Background()

	// The server runs the next SET but its reply is lost: go-redis re-sends
	// it on a new connection.
	lost := p.Apply(faultproxy.DropReply(faultproxy.Named("SET"), 1))
	err = rdb.Set(ctx, "k", "v", 0).Err()
	fmt.Println("SET:", err, "fired:", lost.Fired(), "SET seen:", p.Stats().Commands["SET"])

	// The server runs the next INCR, the client gets LOADING and go-redis
	// retries: INCR ran twice.
	p.Apply(faultproxy.ErrorReply(faultproxy.Named("INCR"), faultproxy.Loading, true, 1))
	n, err := rdb.Incr(ctx, "n").Result()
	fmt.Println("INCR:", n, err)

	// The next GET is answered by the proxy without reaching the server.
	p.Apply(faultproxy.ErrorReply(faultproxy.Named("GET"), "ERR injected", false, 1))
	fmt.Println("GET:", rdb.Get(ctx, "k").Err())
	// Output:
	// SET: <nil> fired: 1 SET seen: 2
	// INCR: 2 <nil>
	// GET: ERR injected
}
