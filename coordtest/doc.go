// Package coordtest is a test kit for code that uses the coordination
// primitives: an in-process server (an embedded miniredis; nothing to
// install or start) with a coordinator over it, a server clock the test
// moves forward, and faults injected into the coordinator's commands, so a
// unit test can show how its code handles a lost lease, an ambiguous
// outcome, a transient failure or a refused permit.
//
//	env := coordtest.New(t) // stopped when the test ends
//	mu, err := lock.New(env.Coordinator(), "jobs:nightly")
//	if err != nil {
//		t.Fatal(err)
//	}
//
// # Shapes
//
// [New] returns an [Env] for one test; its [Env.Coordinator] is what the
// code under test takes, and its [Env.Client] reads the server directly.
//
//   - [Env.Advance] moves the server's clock forward: TTLs expire, windows
//     end, buckets refill. The process's clock does not move (see Advance
//     for what a held handle then sees).
//   - [Env.LoseReplies] runs the next commands on the server and loses
//     their replies: an ambiguous error ([coordination.IsAmbiguous]).
//   - [Env.FailCommands] fails the next commands before they are sent: a
//     transient error that is not ambiguous ([coordination.IsTransient]).
//   - [Env.Pause] holds every command until resumed or its context ends:
//     a server that stopped answering.
//
// Faults count commands, not operations, and every command of the Env's
// client counts: an operation's own (one per operation: each is one
// round trip, its script already loaded), a background keep-alive renewal
// or cleanup, a command the test sends through [Env.Client]. Arm a fault
// right before the call it is for, with no keep-alive running, when the
// test needs it on that call.
//
// # Errors
//
// Errors of injected faults match [ErrInjected]. A lost reply is an i/o
// timeout (transient, ambiguous); a failed command is a refused dial
// (transient, not ambiguous). The library classifies them as it does the
// real failures they stand for, so the code under test meets the same
// errors.Is, IsTransient and IsAmbiguous answers as in production.
//
// # Concurrency
//
// An Env is safe for concurrent use: a test may arm faults, pause and
// move the clock from its own goroutine while operations run in others.
//
// # Limits
//
// The server is miniredis: the library's scripts run on it as on Redis,
// but it lacks hash-field expiration (lock.FieldSet's leases return
// [coordination.ErrUnsupportedServer]) and replicas
// ([coordination.WithReplicaAcks] fails every operation). Faults act on
// commands, not on the coordinator's Pub/Sub connection (see [Env.Pause]).
// For the library's behaviour on real servers, Cluster and failovers, see
// the library's own test suite (docs/testing.md).
package coordtest
