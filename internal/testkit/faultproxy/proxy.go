package faultproxy

import (
	"context"
	"errors"
	"maps"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"testing"
	"time"
)

// Direction selects which way a network-level fault applies.
type Direction int

const (
	// ToServer is the commands' way, from the client to the server.
	ToServer Direction = 1 << iota
	// ToClient is the replies' way, from the server to the client.
	ToClient
	// Both is both ways.
	Both = ToServer | ToClient
)

// CutMode is how [Proxy.CutAll] closes connections.
type CutMode int

const (
	// RST resets the connections (SO_LINGER 0): the client's next read or
	// write fails with "connection reset by peer".
	RST CutMode = iota
	// FIN closes the connections normally: the client reads EOF.
	FIN
)

// Stats are counters of what a proxy saw and did, from its start.
type Stats struct {
	// Accepted is the number of client connections accepted and connected
	// to the target.
	Accepted int
	// Refused is the number of client connections reset at once during
	// [Proxy.Refuse].
	Refused int
	// DialErrors is the number of client connections reset because the
	// target could not be reached.
	DialErrors int
	// Cut is the number of connections closed by [Proxy.CutAll].
	Cut int
	// Commands counts the commands read from clients by upper-case name
	// ("SET": 2 when go-redis re-sent a SET once), whether or not they were
	// forwarded, on every connection (Pub/Sub ones included).
	Commands map[string]int
	// Replies is the number of frames read from the server (replies, push
	// messages, Pub/Sub messages).
	Replies int
	// DroppedReplies counts replies discarded by [KindDropReply] faults.
	DroppedReplies int
	// ReplacedReplies counts server replies replaced by an error
	// ([KindErrorAfter]).
	ReplacedReplies int
	// InjectedErrors counts error replies sent for commands that were not
	// forwarded ([KindErrorInstead]).
	InjectedErrors int
	// DelayedReplies counts replies held by [KindDelayReply] faults.
	DelayedReplies int
	// DelayedCommands counts commands held by [KindDelayCommand] and
	// [KindHoldCommand] faults.
	DelayedCommands int
	// ParseErrors counts connections on which a stream could not be parsed
	// as RESP; such a connection is forwarded byte for byte from then on,
	// without rules.
	ParseErrors int
}

// Event is one fault a rule decided to inject, in the order the proxy read
// the commands.
type Event struct {
	// Seq is the command's position among all the commands the proxy read
	// (1 for the first).
	Seq int
	// Command is the command the fault applies to.
	Command Command
	// Kind is the fault.
	Kind Kind
}

type latency struct{ base, jitter time.Duration }

// Proxy is a fault-injecting TCP proxy in front of one Redis-compatible
// server. It accepts connections on 127.0.0.1, opens one connection to the
// target for each, and forwards RESP traffic both ways, splitting it into
// commands and replies and pairing each reply with its command, so that
// rules can act on the replies of chosen commands. A connection that enters
// Pub/Sub (SUBSCRIBE, PSUBSCRIBE, SSUBSCRIBE and their UNSUBSCRIBE
// counterparts), MONITOR, replication (SYNC, PSYNC) or CLIENT REPLY is no
// longer paired: rules skip its commands from then on, while cuts,
// black-holes and latency still apply to it. RESP3 push frames on a paired
// connection are forwarded as they come, never taken for replies.
//
// Commands are counted and matched against rules when the proxy reads them
// from the client; faults are applied on the way.
//
// Create a Proxy with [New] or [Start]; the zero value is not usable. All
// methods are safe for concurrent use by multiple goroutines.
type Proxy struct {
	target string
	ln     net.Listener
	ctx    context.Context // the proxy's lifetime, cancelled by Close: stops dials in progress
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu          sync.Mutex
	closed      bool
	conns       map[*conn]struct{}
	nextID      uint64
	seq         int
	rules       []*Applied
	lat         [2]latency // [0] ToServer, [1] ToClient
	holes       Direction  // black-holed directions
	changed     chan struct{}
	refuseUntil time.Time
	stats       Stats
	events      []Event
}

// New starts a proxy listening on 127.0.0.1 (a free port) that forwards to
// target ("host:port"). It does not contact the target until a client
// connects. It returns the listener's error, if any. Close it with
// [Proxy.Close].
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{
		target:  target,
		ln:      ln,
		ctx:     ctx,
		cancel:  cancel,
		conns:   map[*conn]struct{}{},
		changed: make(chan struct{}),
		stats:   Stats{Commands: map[string]int{}},
	}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Start is [New] for tests: it fails t if the proxy cannot listen and
// closes the proxy when the test ends (t.Cleanup).
func Start(t testing.TB, target string) *Proxy {
	t.Helper()
	p, err := New(target)
	if err != nil {
		t.Fatalf("faultproxy: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// Addr returns the address clients connect to ("127.0.0.1:port").
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target returns the address of the server the proxy forwards to.
func (p *Proxy) Target() string { return p.target }

// Close stops listening, closes every connection (discarding what is held),
// removes the rules and waits until every goroutine of the proxy has
// returned. It always returns nil; calling it again does nothing.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	conns := slices.Collect(maps.Keys(p.conns))
	for _, a := range slices.Clone(p.rules) {
		p.removeRuleLocked(a)
	}
	p.mu.Unlock()

	p.cancel()
	_ = p.ln.Close()
	for _, c := range conns {
		c.closeAll(false, true)
	}
	p.wg.Wait()
	return nil
}

// Apply installs r and returns its handle. Rules are consulted in the order
// they were applied: each rule whose Match accepts a command counts it, and
// the first one that is due (past its [Rule.After] count, with a fault
// drawn for a [Random] rule) injects its fault; the rules after it do not
// see that command. A command gets at most one fault from rules, on top of
// the proxy-wide latency and black-holes. Applying to a closed proxy
// returns a handle whose Done channel is already closed. It panics for a
// Rule not built by this package's constructors (the zero Rule).
func (p *Proxy) Apply(r Rule) *Applied {
	if r.match == nil || r.times < 1 {
		panic("faultproxy: Apply: use the rule constructors (DropReply, ErrorReply ...)")
	}
	a := &Applied{p: p, rule: r, done: make(chan struct{})}
	if r.kind == KindHoldCommand {
		a.gate = make(chan struct{})
	}
	if r.random {
		a.rng = rand.New(rand.NewPCG(r.seed, 0x9e3779b97f4a7c15))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		close(a.done)
		return a
	}
	a.active = true
	p.rules = append(p.rules, a)
	return a
}

func (p *Proxy) removeRuleLocked(a *Applied) {
	if !a.active {
		return
	}
	a.active = false
	close(a.done)
	p.rules = slices.DeleteFunc(p.rules, func(x *Applied) bool { return x == a })
}

// Clear removes every rule, sets latency to zero and lifts black-holes and
// refusal ([Proxy.Restore]): the proxy forwards untouched from then on.
// Faults already decided for commands read before stay.
func (p *Proxy) Clear() {
	p.mu.Lock()
	for _, a := range slices.Clone(p.rules) {
		p.removeRuleLocked(a)
	}
	p.lat = [2]latency{}
	p.mu.Unlock()
	p.Restore()
}

// Latency delays every frame going in dir by base plus a uniformly random
// extra in [0, jitter], measured from when the proxy read it. Frames keep
// their order (a frame never overtakes the one before it), and pipelined
// frames are delayed together rather than one after another. Latency(dir,
// 0, 0) removes it. It applies to frames read from then on, on every
// connection. It panics if base or jitter is negative.
func (p *Proxy) Latency(dir Direction, base, jitter time.Duration) {
	if base < 0 || jitter < 0 {
		panic("faultproxy: Latency: negative duration")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, d := range []Direction{ToServer, ToClient} {
		if dir&d != 0 {
			p.lat[i] = latency{base, jitter}
		}
	}
}

// BlackHole stops forwarding in dir on every connection, current and new,
// until [Proxy.Restore] or [Proxy.Clear]: connections stay open and what
// arrives is held, then delivered in order once lifted, as TCP would after a
// partition heals (a command held toward the server then runs late). To
// discard what is held instead, call [Proxy.CutAll] before Restore. A
// connection's end (FIN) is held like its data.
func (p *Proxy) BlackHole(dir Direction) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.holes |= dir & Both
	p.notifyLocked()
}

// Restore lifts every black-hole and any refusal of new connections.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.holes = 0
	p.refuseUntil = time.Time{}
	p.notifyLocked()
}

// Refuse resets every connection accepted during the next d, at once.
// The kernel completes the handshake first, so the client usually sees its
// dial succeed and its first read or write fail with "connection reset by
// peer" (or, when the reset arrives that fast, the dial fail with it), not
// "connection refused".
// Refuse(0) ends a refusal. Connections already open are not touched (see
// [Proxy.CutAll]).
func (p *Proxy) Refuse(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if d <= 0 {
		p.refuseUntil = time.Time{}
		return
	}
	p.refuseUntil = time.Now().Add(d)
}

// CutAll closes every current connection, client and server side, how mode
// says, discarding what the proxy holds for them, and returns how many it
// closed. New connections are accepted as usual (see [Proxy.Refuse]).
func (p *Proxy) CutAll(mode CutMode) int {
	p.mu.Lock()
	conns := slices.Collect(maps.Keys(p.conns))
	p.mu.Unlock()
	n := 0
	for _, c := range conns {
		if c.closeAll(mode == RST, true) {
			n++
		}
	}
	p.mu.Lock()
	p.stats.Cut += n
	p.mu.Unlock()
	return n
}

// Stats returns a copy of the proxy's counters.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stats
	s.Commands = maps.Clone(p.stats.Commands)
	return s
}

// Events returns, in order, the faults rules decided to inject so far. The
// log grows with the faults injected (not with the commands) for the
// proxy's life.
func (p *Proxy) Events() []Event {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.events)
}

// notifyLocked wakes the writers waiting for a black-hole to be lifted.
func (p *Proxy) notifyLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// waitOpen waits until dir is not black-holed; it returns false if done is
// closed first.
func (p *Proxy) waitOpen(dir Direction, done <-chan struct{}) bool {
	for {
		p.mu.Lock()
		holed, ch := p.holes&dir != 0, p.changed
		p.mu.Unlock()
		if !holed {
			return true
		}
		select {
		case <-ch:
		case <-done:
			return false
		}
	}
}

// release returns when a frame of dir read at now may be forwarded.
func (p *Proxy) release(dir Direction, now time.Time) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.lat[0]
	if dir == ToClient {
		l = p.lat[1]
	}
	d := l.base
	if l.jitter > 0 {
		d += rand.N(l.jitter + 1)
	}
	return now.Add(d)
}

func (p *Proxy) bump(f func(s *Stats)) {
	p.mu.Lock()
	f(&p.stats)
	p.mu.Unlock()
}

// decide counts a command of a paired connection and returns the fault the
// rules give it (Kind 0 for none), and the applied rule that gave it.
func (p *Proxy) decide(cmd Command) (Kind, *Rule, *Applied) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seq++
	p.stats.Commands[cmd.Name()]++
	for _, a := range p.rules {
		if !a.rule.match(cmd) {
			continue
		}
		a.seen++
		if a.seen <= a.rule.skip {
			continue
		}
		k := a.rule.kind
		if a.rule.random {
			if k = a.rule.draw(a.rng); k == 0 {
				continue
			}
		}
		a.fired++
		p.events = append(p.events, Event{Seq: p.seq, Command: cmd, Kind: k})
		r := &a.rule
		if a.fired >= a.rule.times {
			p.removeRuleLocked(a)
		}
		return k, r, a
	}
	return 0, nil, nil
}

// count counts a command that rules do not see.
func (p *Proxy) count(name string) {
	p.mu.Lock()
	p.seq++
	p.stats.Commands[name]++
	p.mu.Unlock()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		nc, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			select { // e.g. too many open files: try again shortly
			case <-p.ctx.Done():
				return
			case <-time.After(10 * time.Millisecond):
			}
			continue
		}
		client := nc.(*net.TCPConn)
		p.mu.Lock()
		switch {
		case p.closed:
			p.mu.Unlock()
			_ = client.Close()
			return
		case time.Now().Before(p.refuseUntil):
			p.stats.Refused++
			p.mu.Unlock()
			_ = client.SetLinger(0)
			_ = client.Close()
			continue
		}
		p.wg.Add(1)
		p.mu.Unlock()
		go p.serve(client)
	}
}

// serve dials the target for client and runs the connection.
func (p *Proxy) serve(client *net.TCPConn) {
	defer p.wg.Done()
	d := net.Dialer{Timeout: 5 * time.Second}
	sc, err := d.DialContext(p.ctx, "tcp", p.target)
	if err != nil {
		p.bump(func(s *Stats) { s.DialErrors++ })
		_ = client.SetLinger(0)
		_ = client.Close()
		return
	}
	c := newConn(p, client, sc.(*net.TCPConn))
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		_ = client.Close()
		_ = sc.Close()
		return
	}
	p.nextID++
	c.id = p.nextID
	p.conns[c] = struct{}{}
	p.stats.Accepted++
	p.wg.Add(4)
	p.mu.Unlock()
	go c.readCommands()
	go c.readReplies()
	go c.write(c.toServer)
	go c.write(c.toClient)
}
