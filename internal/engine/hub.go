package engine

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/coordkit/coordination/internal/slot"
)

// Release channels are named by slot.Channels, the Go side of the Lua
// fragment notify that every releasing script publishes with: a key's
// shard channel (in the key's Cluster slot, for SPUBLISH/SSUBSCRIBE) and
// its classic channel ("coordination:" + the prefixed key, for
// PUBLISH/SUBSCRIBE where the server has no sharded Pub/Sub). ACLs grant
// both as &coordination:*.

// confirmTimeout bounds how long Watch waits for the server to confirm a new
// subscription before letting the waiter go on without it (its periodic
// re-check then covers a missed message). A server answers in about a
// millisecond; no answer usually means the ACL forbids the channel.
const confirmTimeout = 500 * time.Millisecond

// Watch is one waiter's registration for notifications about one key.
// Create it with [Engine.Watch] and Close it when done. It is safe for
// use by one waiter goroutine plus the coordinator's dispatcher.
type Watch struct {
	h  *hub
	ch string
	st *chanState
	c  chan struct{}
	// only, when not empty, is the one message payload that wakes the
	// watch (a queued waiter's owner token: a first-in first-out release
	// publishes the token of the waiter it wakes); other messages are
	// ignored. A re-subscription still wakes it.
	only string
}

// confirmed reports whether the server has confirmed the subscription, so
// that notifications can arrive. It can turn true after Watch returned; it
// stays false when the server refuses the channel (an ACL without the
// coordination:* channels), and waiters should then re-check more often.
func (w *Watch) confirmed() bool {
	select {
	case <-w.st.ready:
		return true
	default:
		return false
	}
}

// C returns a channel that receives a value when a notification for the key
// arrives, or when the shared subscription reconnected (a message may have
// been lost). Several notifications between two reads coalesce into one.
func (w *Watch) C() <-chan struct{} { return w.c }

// Close ends the registration. When it was the last waiter on its channel
// the channel is unsubscribed, and when it was the last waiter of the
// coordinator the shared Pub/Sub connection is closed and its goroutines
// end. Close is idempotent.
func (w *Watch) Close() {
	if w == nil || w.h == nil {
		return
	}
	w.h.remove(w)
	w.h = nil
}

// Watch registers the caller for notifications about the prefixed key full and
// returns once the server has confirmed the subscription (or after a short
// bound, when it is slow to confirm). It is [Engine.watchPart] with no part.
func (e *Engine) Watch(ctx context.Context, full string) (*Watch, error) {
	return e.watchPart(ctx, full, "")
}

// watchPart registers the caller for notifications about one part of the
// prefixed key full (part is appended to the key's channel names: a hash
// field's lease, "\x00" + field), or about the key itself when part is
// empty, and returns once the server has confirmed the subscription (or
// after a short bound, when it is slow to confirm).
//
// Where the server has sharded Pub/Sub (Redis 7.0+, Valkey; the first
// watch of the engine asks with an SPUBLISH of an empty message on a
// channel no waiter listens to, as the scripts publish) and the key has a shard
// channel, the subscription is sharded (SSUBSCRIBE): on a Cluster client
// the waiters share one connection per primary that owns a watched slot,
// otherwise one connection. Keys without a shard channel, and every key
// where the server refuses SPUBLISH, share one classic (SUBSCRIBE)
// connection. So whatever the number of keys and waiters, a coordinator
// holds at most one Pub/Sub connection per shard plus one.
//
// Waiters must call Watch first and only then retry their operation: a
// release that happens after Watch returns is never missed (a lost message
// can only delay the waiter until its next periodic re-check).
//
// It returns ctx's error if ctx ends first, the error of the subscribing
// command (a permission error when the ACL forbids the channel), or an
// error wrapping [sentinel.ErrClosed] once [Engine.Shutdown] has begun.
func (e *Engine) watchPart(ctx context.Context, full, part string) (*Watch, error) {
	return e.watchFor(ctx, full, part, "")
}

// watchFor is [Engine.watchPart] for a waiter that only the messages whose
// payload is only wake (any message when only is empty); see [Watch].
func (e *Engine) watchFor(ctx context.Context, full, part, only string) (*Watch, error) {
	classic, shard := slot.Channels(full, part)
	return e.hub.watch(ctx, classic, shard, only)
}

type chanState struct {
	waiters map[*Watch]struct{}
	conn    *subConn      // the connection subscribed to it (nil while a repair re-homes it); set under subMu and mu
	pending int           // subscribing commands sent and not yet confirmed
	ready   chan struct{} // closed at the first confirmation
	readyOK bool
}

// subConn is one shared Pub/Sub connection of the hub and the channels
// subscribed on it.
type subConn struct {
	key     string // its key in hub.conns
	sharded bool   // SSUBSCRIBE (otherwise SUBSCRIBE)
	cluster bool   // one primary's connection of a Cluster client: the hub repairs it
	ps      *redis.PubSub
	done    chan struct{}       // closed when its dispatcher has ended
	stop    chan struct{}       // closed when the hub drops it
	chans   map[string]struct{} // guarded by hub.subMu

	repairing atomic.Bool // a repair is scheduled
}

// Sharded Pub/Sub support of the server, as the hub found it.
const (
	shardUnknown = iota
	shardYes
	shardNo
)

// hub multiplexes every waiter of a coordinator onto a few *redis.PubSub:
// one classic, and for sharded subscriptions one per Cluster primary (one
// in all on other clients). A connection exists only while someone waits
// on one of its channels.
type hub struct {
	e *Engine

	subMu   sync.Mutex // serialises subscribing commands and the connections' life
	conns   map[string]*subConn
	sharded int  // shardUnknown, shardYes, shardNo
	closed  bool // Shutdown closed the hub: no new subscription

	mu    sync.Mutex // guards chans and chanState; held only briefly, never across I/O
	chans map[string]*chanState
}

func newHub(e *Engine) *hub {
	return &hub{e: e, conns: map[string]*subConn{}, chans: map[string]*chanState{}}
}

func (h *hub) watch(ctx context.Context, classic, shard, only string) (*Watch, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	h.subMu.Lock()
	if h.closed {
		h.subMu.Unlock()
		return nil, errShutdown
	}
	ch, sharded := classic, false
	if shard != "" {
		if h.sharded == shardUnknown {
			if err := h.probe(ctx); err != nil {
				h.subMu.Unlock()
				return nil, err
			}
		}
		if h.sharded == shardYes {
			ch, sharded = shard, true
		}
	}
	w := &Watch{h: h, ch: ch, c: make(chan struct{}, 1), only: only}
	h.mu.Lock()
	st := h.chans[ch]
	fresh := st == nil
	if fresh {
		st = &chanState{waiters: map[*Watch]struct{}{}, ready: make(chan struct{})}
		h.chans[ch] = st
	}
	st.waiters[w] = struct{}{}
	w.st = st
	h.mu.Unlock()

	if fresh {
		if err := h.subscribe(ctx, ch, st, sharded); err != nil {
			h.subMu.Unlock()
			w.Close()
			return nil, err
		}
	}
	h.subMu.Unlock()

	t := time.NewTimer(confirmTimeout)
	defer t.Stop()
	select {
	case <-st.ready:
	case <-t.C:
	case <-ctx.Done():
		w.Close()
		return nil, ctx.Err()
	case <-h.e.life.closing:
		w.Close()
		return nil, errShutdown
	}
	return w, nil
}

// probe finds out, once per engine, whether the server has sharded Pub/Sub
// as the scripts do: by publishing an empty message with SPUBLISH on
// probeChannel. A refusal (no such command, an ACL without it) makes every
// subscription classic, as the scripts then PUBLISH; an error that says
// nothing about the server (the network, a failover, ctx) is returned and
// the next watch asks again. Called with subMu held.
func (h *hub) probe(ctx context.Context) error {
	err := h.e.client.SPublish(ctx, probeChannel(h.e.prefix), "").Err()
	if err == nil {
		h.sharded = shardYes
		return nil
	}
	var re redis.Error
	if !errors.As(err, &re) || Classify(err) == Transient ||
		strings.HasPrefix(re.Error(), "MOVED") || strings.HasPrefix(re.Error(), "ASK") {
		return err
	}
	h.sharded = shardNo
	h.e.logger.Debug("coordination: the server refuses SPUBLISH; release notifications use classic Pub/Sub",
		"error", Describe(err))
	return nil
}

// probeChannel is the channel the probe publishes on: under the key
// prefix, so that the ACL's &coordination:<prefix>* grants it, and no
// shard channel a waiter subscribes to (under a prefix without a hash tag
// it has none, and shard channels all have one; under a prefix with a
// hash tag it is the channel of a key no one names), so that the probe
// wakes no one.
func probeChannel(prefix string) string {
	return slot.ChannelPrefix + prefix + "\x00notification probe\x00"
}

// subscribe subscribes ch, of st, on the connection it belongs to (which it
// opens when needed) and attaches it there, also when the command fails: the
// connection's dispatcher then notices the failure and repairs it, or the
// waiter's Close drops it. Called with subMu held.
func (h *hub) subscribe(ctx context.Context, ch string, st *chanState, sharded bool) error {
	c, err := h.connFor(ctx, ch, sharded)
	if err != nil {
		return err
	}
	c.chans[ch] = struct{}{}
	h.mu.Lock()
	st.conn = c
	st.pending++
	h.mu.Unlock()
	if sharded {
		return c.ps.SSubscribe(ctx, ch)
	}
	return c.ps.Subscribe(ctx, ch)
}

// connFor returns the connection ch is subscribed on, opening it when
// needed: the classic one, or the sharded one (on a Cluster client, that
// of the primary that owns ch's slot). Called with subMu held.
func (h *hub) connFor(ctx context.Context, ch string, sharded bool) (*subConn, error) {
	key := "classic"
	cluster := false
	var open func() *redis.PubSub
	switch cc, ok := h.e.client.(*redis.ClusterClient); {
	case !sharded:
		open = func() *redis.PubSub { return h.e.client.Subscribe(ctx) }
	case ok:
		node, err := cc.MasterForKey(ctx, ch)
		if err != nil {
			return nil, err
		}
		key, cluster = "shard "+node.Options().Addr, true
		open = func() *redis.PubSub { return node.SSubscribe(ctx) }
	default:
		key = "shard"
		open = func() *redis.PubSub { return h.e.client.SSubscribe(ctx) }
	}
	if c := h.conns[key]; c != nil {
		return c, nil
	}
	c := &subConn{key: key, sharded: sharded, cluster: cluster, ps: open(),
		done: make(chan struct{}), stop: make(chan struct{}), chans: map[string]struct{}{}}
	h.conns[key] = c
	go h.dispatch(c)
	return c, nil
}

// drop closes c for good and waits for its dispatcher to end. Called with
// subMu held.
func (h *hub) drop(c *subConn) {
	if h.conns[c.key] == c {
		delete(h.conns, c.key)
	}
	select {
	case <-c.stop:
		return // dropped before
	default:
	}
	close(c.stop)
	_ = c.ps.Close()
	<-c.done
}

// Waiters returns, for tests, the number of registered [Watch]es (the
// waiters blocked on a notification of this engine) and of the shared
// Pub/Sub connections the engine holds open for them (one per server
// with waiters at most).
func (e *Engine) Waiters() (waiters, conns int) {
	h := e.hub
	h.mu.Lock()
	for _, st := range h.chans {
		waiters += len(st.waiters)
	}
	h.mu.Unlock()
	h.subMu.Lock()
	conns = len(h.conns)
	h.subMu.Unlock()
	return waiters, conns
}

// close closes the shared Pub/Sub connections for good, waiting for their
// dispatchers to end, and wakes every waiter: later watches fail with an
// error wrapping sentinel.ErrClosed. The registrations left are forgotten (their
// Close does nothing).
func (h *hub) close() {
	h.subMu.Lock()
	defer h.subMu.Unlock()
	h.closed = true
	for _, c := range h.conns {
		h.drop(c)
	}
	h.mu.Lock()
	for _, st := range h.chans {
		h.signal(st)
	}
	h.chans = map[string]*chanState{}
	h.mu.Unlock()
}

func (h *hub) remove(w *Watch) {
	h.subMu.Lock()
	defer h.subMu.Unlock()
	h.mu.Lock()
	st := h.chans[w.ch]
	if st == nil || st != w.st {
		h.mu.Unlock()
		return
	}
	delete(st.waiters, w)
	last := len(st.waiters) == 0
	if last {
		delete(h.chans, w.ch)
	}
	c := st.conn
	h.mu.Unlock()
	if !last || c == nil {
		return
	}
	delete(c.chans, w.ch)
	if len(c.chans) == 0 {
		h.drop(c)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	if c.sharded {
		_ = c.ps.SUnsubscribe(ctx, w.ch)
	} else {
		_ = c.ps.Unsubscribe(ctx, w.ch)
	}
	cancel()
}

// healthCheck is how long a shared subscription may be silent before
// the dispatcher pings it (go-redis' Channel uses the same period).
const healthCheck = 3 * time.Second

// dispatch delivers messages and subscription confirmations of c until c
// is closed. It reads c itself (not through go-redis' Channel, whose
// goroutine would add a hand-off between the socket and the waiter). A
// re-subscription confirmation wakes the channel's waiters because a
// message may have been lost while disconnected.
//
// go-redis reconnects and re-subscribes on its own, which is enough for
// the classic connection and for the sharded one of a client that is not
// a Cluster client. A Cluster primary's sharded connection is repaired by
// the hub instead ([hub.repair]) after any error (a lost connection, a
// MOVED reply after a failover or a slot migration, the CROSSSLOT reply
// to go-redis' re-subscription of channels of several slots in one
// command) and after the server unsubscribed a channel itself (its slot
// moved away).
func (h *hub) dispatch(c *subConn) {
	defer close(c.done)
	heard := make(chan struct{}, 1)
	stop := make(chan struct{})
	defer close(stop)
	go ping(c.ps, heard, stop)
	failures := 0
	for {
		m, err := c.ps.Receive(context.Background())
		if err != nil {
			if errors.Is(err, redis.ErrClosed) {
				return
			}
			if c.cluster {
				h.scheduleRepair(c)
			}
			// go-redis reconnects on the next call; do not spin while the
			// server is away.
			if failures > 0 {
				time.Sleep(100 * time.Millisecond)
			}
			failures++
			continue
		}
		failures = 0
		select {
		case heard <- struct{}{}:
		default:
		}
		switch m := m.(type) {
		case *redis.Message:
			h.wake(m.Channel, m.Payload)
		case *redis.Subscription:
			switch m.Kind {
			case "subscribe", "ssubscribe":
				h.confirmed(c, m.Channel)
			case "sunsubscribe":
				h.mu.Lock()
				st := h.chans[m.Channel]
				lost := st != nil && st.conn == c && st.pending == 0
				h.mu.Unlock()
				if lost && c.cluster {
					h.scheduleRepair(c)
				}
			}
		}
	}
}

// confirmed records the server's confirmation of ch's subscription on c.
func (h *hub) confirmed(c *subConn, ch string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	st := h.chans[ch]
	if st == nil || st.conn != c {
		return
	}
	if st.pending > 0 {
		st.pending--
	}
	if !st.readyOK && st.pending == 0 {
		st.readyOK = true
		close(st.ready)
	} else if st.readyOK {
		h.signal(st)
	}
}

// Repair delays: the first after an error (errors come in bursts, and
// go-redis reloads a Cluster's slot map asynchronously), then the backoff
// between attempts to re-home channels whose primary could not be found.
const (
	repairDelay    = 100 * time.Millisecond
	repairMaxDelay = time.Second
)

// scheduleRepair starts c's repair unless one is scheduled.
func (h *hub) scheduleRepair(c *subConn) {
	if c.repairing.Swap(true) {
		return
	}
	go h.repair(c)
}

// repair replaces c, a Cluster primary's sharded connection that failed
// or lost a channel: it asks the client to reload the slot map, closes c,
// and subscribes each of its channels that still has waiters again on the
// connection of the primary that now owns its slot, retrying with backoff
// those whose primary cannot be found yet (the cluster is failing over).
// Each new confirmation wakes the channel's waiters, who re-check (a
// release may have been missed meanwhile).
func (h *hub) repair(c *subConn) {
	if cc, ok := h.e.client.(*redis.ClusterClient); ok {
		cc.ReloadState(context.Background())
	}
	if !h.pause(repairDelay, c.stop) {
		return
	}
	h.subMu.Lock()
	if h.closed || h.conns[c.key] != c {
		h.subMu.Unlock()
		return
	}
	h.drop(c)
	var left []string
	h.mu.Lock()
	for ch := range c.chans {
		if st := h.chans[ch]; st != nil && st.conn == c {
			st.conn, st.pending = nil, 0
			left = append(left, ch)
		}
	}
	h.mu.Unlock()
	h.subMu.Unlock()

	for d := repairDelay; len(left) > 0; d = min(2*d, repairMaxDelay) {
		h.subMu.Lock()
		if h.closed {
			h.subMu.Unlock()
			return
		}
		var again []string
		for _, ch := range left {
			h.mu.Lock()
			st := h.chans[ch]
			h.mu.Unlock()
			if st == nil || st.conn != nil {
				continue // no waiter left, or re-homed by a new watch
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			if err := h.subscribe(ctx, ch, st, true); err != nil && st.conn == nil {
				again = append(again, ch)
			}
			cancel()
		}
		h.subMu.Unlock()
		left = again
		if len(left) > 0 {
			if cc, ok := h.e.client.(*redis.ClusterClient); ok {
				cc.ReloadState(context.Background())
			}
			if !h.pause(d, nil) {
				return
			}
		}
	}
}

// pause sleeps d unless stop is closed or Shutdown begins first; it
// reports whether it slept the whole d.
func (h *hub) pause(d time.Duration, stop <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-stop:
	case <-h.e.life.closing:
	}
	return false
}

// ping pings ps after every healthCheck without a message from it, until
// stop is closed: a ping that cannot be written makes go-redis reconnect
// (and re-subscribe).
func ping(ps *redis.PubSub, heard, stop <-chan struct{}) {
	t := time.NewTimer(healthCheck)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-heard:
			if !t.Stop() {
				select {
				case <-t.C:
				default:
				}
			}
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = ps.Ping(ctx)
			cancel()
		}
		t.Reset(healthCheck)
	}
}

// wake wakes the waiters of ch for a message with payload: every waiter
// without a payload of its own ([Watch] only), and those whose is
// payload.
func (h *hub) wake(ch, payload string) {
	h.mu.Lock()
	if st := h.chans[ch]; st != nil {
		for w := range st.waiters {
			if w.only != "" && w.only != payload {
				continue
			}
			select {
			case w.c <- struct{}{}:
			default:
			}
		}
	}
	h.mu.Unlock()
}

// signal must be called with h.mu held.
func (h *hub) signal(st *chanState) {
	for w := range st.waiters {
		select {
		case w.c <- struct{}{}:
		default:
		}
	}
}
