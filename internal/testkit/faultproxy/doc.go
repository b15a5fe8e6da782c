// Package faultproxy is a fault-injecting TCP proxy for reliability tests. It
// sits between a go-redis client and one Redis-compatible server on
// 127.0.0.1, understands RESP2 and RESP3 well enough to split the traffic
// into commands and replies and to pair each reply with its command, and
// injects faults on command:
//
//   - lost replies: [DropReply] lets the server run a command, discards its
//     reply and closes the connection, so go-redis sees EOF and (unless
//     MaxRetries is -1) re-sends the command on a new connection;
//   - error replies: [ErrorReply] answers [Loading], [ReadOnly] or any error
//     either instead of forwarding the command or after the server ran it;
//   - delays: [DelayReply] and [DelayCommand] hold one frame,
//     [Proxy.Latency] delays every frame (fixed, or fixed plus jitter);
//   - late requests: [HoldCommand] holds a command until the test lets it
//     through ([Applied.Let]); a held or delayed command reaches the server
//     even after its client closed or reset the connection, as a request
//     still in the network would ([Applied.Answered] counts its replies);
//   - partitions: [Proxy.BlackHole] holds everything going one way or both
//     until [Proxy.Restore], [Proxy.CutAll] resets (RST) or closes (FIN)
//     every connection, [Proxy.Refuse] resets new connections for a while;
//   - seeded random faults: [Random], reproducible from its seed for the
//     same sequence of matching commands.
//
// Rules choose their commands with a [Match] ([Named], [Scripts],
// [ScriptSHA], [Arg], [All], [Any] or any func) and a count: the next n
// matching commands, optionally after skipping some ([Rule.After]: the
// Nth command). [Proxy.Stats] counts commands by name (retries included),
// replies dropped or replaced, errors injected and connections accepted,
// refused and cut; [Proxy.Events] lists the faults decided, in order.
//
// A connection that enters Pub/Sub (SUBSCRIBE ...), MONITOR or CLIENT REPLY
// is forwarded without pairing from then on: rules skip it, while latency,
// black-holes and cuts still apply. Inline commands (a line such as
// "PING\r\n", as redis-cli may send) are understood, split on blanks
// without interpreting quotes. A stream that is not valid RESP is counted
// in [Stats].ParseErrors and forwarded byte for byte from then on.
//
// A typical test, with a real server from the test harness:
//
//	srv := testharness.StartStandalone(t, testharness.FirstFlavor(t))
//	p := faultproxy.Start(t, srv.Addr) // closed when the test ends
//	opt := srv.Options()
//	opt.Addr = p.Addr()
//	rdb := redis.NewClient(opt)
//	defer rdb.Close()
//
//	// The script runs on the server but its reply is lost; go-redis
//	// re-sends it on a new connection, so it runs twice.
//	lost := p.Apply(faultproxy.DropReply(faultproxy.ScriptSHA(script.Hash()), 1))
//	... run the operation under test ...
//	if lost.Fired() != 1 || p.Stats().Commands["EVALSHA"] != 2 { ... }
//
// The proxy holds what it delays or black-holes in memory, without bound:
// it is a test tool, not a production component.
package faultproxy
