package faultproxy

import (
	"bytes"
	"errors"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// itemKind is what a writer does with a queued item.
type itemKind uint8

const (
	itemData      itemKind = iota // write data
	itemHalfClose                 // the source ended: close the destination's write side
	itemClose                     // close the whole connection (after a dropped reply)
)

// item is one thing queued for a writer, not to be done before at (nor
// before gate is closed, when it has one).
type item struct {
	kind itemKind
	data []byte
	at   time.Time
	gate <-chan struct{} // HoldCommand: closed by Applied.Let
	kept bool            // a held or delayed command: delivered even after the client left
}

// pipe is the queue of one direction of one connection, drained in order by
// its writer goroutine.
type pipe struct {
	dir  Direction
	dst  *net.TCPConn
	mu   sync.Mutex
	q    []item
	wake chan struct{} // capacity 1
}

func (pp *pipe) push(it item) {
	pp.mu.Lock()
	pp.q = append(pp.q, it)
	pp.mu.Unlock()
	select {
	case pp.wake <- struct{}{}:
	default:
	}
}

// pop removes and returns the first item, if any.
func (pp *pipe) pop() (item, bool) {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	if len(pp.q) == 0 {
		return item{}, false
	}
	it := pp.q[0]
	pp.q[0] = item{}
	pp.q = pp.q[1:]
	return it, true
}

// popReady removes and returns the first item if it is data due by now.
func (pp *pipe) popReady(now time.Time) (item, bool) {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	if len(pp.q) == 0 || pp.q[0].kind != itemData || pp.q[0].at.After(now) || pp.q[0].gate != nil || pp.q[0].kept {
		return item{}, false
	}
	it := pp.q[0]
	pp.q[0] = item{}
	pp.q = pp.q[1:]
	return it, true
}

// pending is a command forwarded (or answered by the proxy) whose reply the
// client has not been sent yet.
type pending struct {
	kind      Kind          // fault for the reply (0: none)
	delay     time.Duration // KindDelayReply
	reply     []byte        // error frame for KindErrorAfter and KindErrorInstead
	synthetic bool          // KindErrorInstead: no server reply will come
	switches  bool          // the connection stops being paired after this reply
	held      *Applied      // KindHoldCommand, KindDelayCommand: counts the reply
}

// conn is one proxied client connection and its server connection.
type conn struct {
	p        *Proxy
	id       uint64
	client   *net.TCPConn
	server   *net.TCPConn
	toServer *pipe
	toClient *pipe
	done     chan struct{}
	once     sync.Once
	halves   atomic.Int32 // directions that ended normally

	// kept counts the held or delayed commands queued toward the server and
	// not written yet; lingering is set when the client side was closed
	// while some were: the server side then stays open until the toServer
	// writer has delivered them (see [HoldCommand]).
	kept      atomic.Int32
	lingering atomic.Bool
	repliesIn chan struct{} // closed when readReplies returns

	// pmu guards the pairing state. Lock order: pmu, then p.mu.
	pmu      sync.Mutex
	pending  []pending
	switched bool // a command that ends pairing was read: pair no more commands
	unpaired bool // its reply was read (or a stream failed to parse): pair no replies
}

func newConn(p *Proxy, client, server *net.TCPConn) *conn {
	return &conn{
		p:         p,
		client:    client,
		server:    server,
		toServer:  &pipe{dir: ToServer, dst: server, wake: make(chan struct{}, 1)},
		toClient:  &pipe{dir: ToClient, dst: client, wake: make(chan struct{}, 1)},
		done:      make(chan struct{}),
		repliesIn: make(chan struct{}),
	}
}

// close closes both sides (with RST if rst) and reports whether this call
// did it. When held or delayed commands are still queued toward the
// server, the server side stays open until they are delivered (the
// toServer writer closes it).
func (c *conn) close(rst bool) bool { return c.closeAll(rst, false) }

// closeAll is close; with discard, what is held is dropped too (CutAll,
// Close).
func (c *conn) closeAll(rst, discard bool) bool {
	first := false
	c.once.Do(func() {
		first = true
		linger := !discard && c.kept.Load() > 0 && c.p.ctx.Err() == nil
		if rst {
			_ = c.client.SetLinger(0)
			if !linger {
				_ = c.server.SetLinger(0)
			}
		}
		_ = c.client.Close()
		if linger {
			c.lingering.Store(true)
		} else {
			_ = c.server.Close()
		}
		close(c.done)
		c.p.mu.Lock()
		delete(c.p.conns, c)
		c.p.mu.Unlock()
	})
	return first
}

// halfDone records that one direction ended normally; the connection is
// closed when both have.
func (c *conn) halfDone() {
	if c.halves.Add(1) == 2 {
		c.close(false)
	}
}

// write drains pp in order: it waits for each item's time (and gate) and
// for its direction not to be black-holed, then writes (coalescing the data
// items that are due). Once the connection is closed it stops, unless it is
// the toServer writer of a lingering connection: it then goes on
// delivering what was queued until no held command is left (see linger).
func (c *conn) write(pp *pipe) {
	defer c.p.wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var stop <-chan struct{} = c.done
	lingered := false
	defer func() {
		if lingered { // the proxy closed meanwhile, or a write failed
			_ = c.server.Close()
		}
	}()
	// closed reports whether the connection is closed for good for this
	// writer; a lingering toServer writer switches to the proxy's
	// lifetime instead.
	closed := func() bool {
		if !lingered && pp.dir == ToServer && c.lingering.Load() {
			stop, lingered = c.p.ctx.Done(), true
			return false
		}
		return true
	}
	for {
		if lingered && c.kept.Load() == 0 {
			c.linger()
			return
		}
		it, ok := pp.pop()
		if !ok {
			select {
			case <-pp.wake:
			case <-stop:
				if closed() {
					return
				}
			}
			continue
		}
		for d := time.Until(it.at); d > 0; d = time.Until(it.at) {
			timer.Reset(d)
			select {
			case <-timer.C:
			case <-stop:
				if closed() {
					return
				}
			}
		}
		for it.gate != nil {
			select {
			case <-it.gate:
				it.gate = nil
			case <-stop:
				if closed() {
					return
				}
			}
		}
		for !c.p.waitOpen(pp.dir, stop) {
			if closed() {
				return
			}
		}
		switch it.kind {
		case itemData:
			bufs := net.Buffers{it.data}
			for now := time.Now(); ; {
				more, ok := pp.popReady(now)
				if !ok {
					break
				}
				bufs = append(bufs, more.data)
			}
			_, err := bufs.WriteTo(pp.dst)
			if it.kept {
				c.kept.Add(-1)
			}
			if err != nil {
				if lingered {
					_ = c.server.Close()
				} else {
					c.close(true)
				}
				return
			}
		case itemHalfClose:
			if lingered { // nothing after the client's end
				c.linger()
				return
			}
			_ = pp.dst.CloseWrite()
			c.halfDone()
			return
		case itemClose:
			c.close(false)
			return
		}
	}
}

// linger ends a lingering connection once its held commands are
// delivered: it closes the server connection's write side, waits (at most
// 5 s, or until the proxy closes) for the server to answer and close, and
// closes it.
func (c *conn) linger() {
	_ = c.server.CloseWrite()
	t := time.NewTimer(5 * time.Second)
	defer t.Stop()
	select {
	case <-c.repliesIn:
	case <-t.C:
	case <-c.p.ctx.Done():
	}
	_ = c.server.Close()
}

// readLoop reads src, splitting it into frames passed to frame (which must
// copy what it keeps). After a parse error it passes the rest of the stream
// to raw, chunk by chunk, unparsed; so it does with an incomplete frame left
// when the stream ends. It returns the read error (io.EOF at the end of the
// stream).
func readLoop(src net.Conn, sp *splitter, frame func([]byte), parseErr func(), raw func([]byte)) error {
	buf := make([]byte, 0, 16<<10)
	start := 0
	rawMode := false
	var readErr error
	for {
		for !rawMode {
			n, err := sp.next(buf[start:])
			if err != nil {
				rawMode = true
				parseErr()
				if start < len(buf) {
					raw(bytes.Clone(buf[start:]))
				}
				start = len(buf)
				break
			}
			if n == 0 {
				break
			}
			frame(buf[start : start+n])
			start += n
		}
		if start > 0 {
			n := copy(buf, buf[start:])
			buf, start = buf[:n], 0
		}
		if readErr != nil {
			if !rawMode && len(buf) > 0 {
				raw(bytes.Clone(buf))
			}
			return readErr
		}
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, cap(buf))
		}
		m, err := src.Read(buf[len(buf):cap(buf)])
		if m > 0 {
			if rawMode {
				raw(bytes.Clone(buf[len(buf) : len(buf)+m]))
			} else {
				buf = buf[:len(buf)+m]
			}
		}
		readErr = err
	}
}

// ended handles the end of a reader: EOF is forwarded in order as a
// half-close; any other error (a reset, or the connection closed under it)
// closes the connection with RST.
func (c *conn) ended(err error, pp *pipe) {
	if errors.Is(err, io.EOF) {
		pp.push(item{kind: itemHalfClose, at: c.p.release(pp.dir, time.Now())})
		return
	}
	c.close(true)
}

// unpair stops pairing on c (a stream could not be parsed).
func (c *conn) unpair() {
	c.pmu.Lock()
	c.switched, c.unpaired, c.pending = true, true, nil
	c.pmu.Unlock()
	c.p.bump(func(s *Stats) { s.ParseErrors++ })
}

func (c *conn) readCommands() {
	defer c.p.wg.Done()
	sp := newSplitter(true)
	err := readLoop(c.client, sp,
		func(frame []byte) { c.onCommand(frame, sp.args) },
		c.unpair,
		func(chunk []byte) {
			c.toServer.push(item{data: chunk, at: c.p.release(ToServer, time.Now())})
		})
	c.ended(err, c.toServer)
}

func (c *conn) readReplies() {
	defer c.p.wg.Done()
	defer close(c.repliesIn)
	sp := newSplitter(false)
	err := readLoop(c.server, sp,
		func(frame []byte) { c.onReply(frame, sp.kind) },
		c.unpair,
		func(chunk []byte) {
			c.toClient.push(item{data: chunk, at: c.p.release(ToClient, time.Now())})
		})
	c.ended(err, c.toClient)
}

// onCommand handles one command frame from the client.
func (c *conn) onCommand(frame []byte, offs [][2]int) {
	p, now := c.p, time.Now()
	data := bytes.Clone(frame)
	if len(offs) == 0 { // nothing to run: the server will not answer
		c.toServer.push(item{data: data, at: p.release(ToServer, now)})
		return
	}
	args := make([]string, len(offs))
	for i, o := range offs {
		args[i] = string(frame[o[0]:o[1]])
	}
	cmd := Command{Args: args, Conn: c.id}

	c.pmu.Lock()
	defer c.pmu.Unlock()
	if c.switched {
		p.count(cmd.Name())
		c.toServer.push(item{data: data, at: p.release(ToServer, now)})
		return
	}
	kind, r, a := p.decide(cmd)
	if kind == KindErrorInstead {
		if len(c.pending) == 0 {
			c.sendError(r.reply, now)
		} else {
			c.pending = append(c.pending, pending{kind: kind, reply: r.reply, synthetic: true})
		}
		return
	}
	e := pending{kind: kind, switches: endsPairing(cmd)}
	if r != nil {
		e.delay, e.reply = r.delay, r.reply
	}
	c.pending = append(c.pending, e)
	c.switched = e.switches
	it := item{data: data, at: p.release(ToServer, now)}
	switch kind {
	case KindDelayCommand, KindHoldCommand:
		if kind == KindDelayCommand {
			it.at = it.at.Add(r.delay)
		} else {
			it.gate = a.gate
		}
		it.kept = true
		c.kept.Add(1)
		c.pending[len(c.pending)-1].held = a
		p.bump(func(s *Stats) { s.DelayedCommands++ })
	}
	c.toServer.push(it)
}

// sendError sends an injected error reply for a command not forwarded.
// Called with pmu held, when every earlier reply has been queued.
func (c *conn) sendError(reply []byte, now time.Time) {
	c.toClient.push(item{data: reply, at: c.p.release(ToClient, now)})
	c.p.bump(func(s *Stats) { s.InjectedErrors++ })
}

// onReply handles one frame from the server: kind is its RESP type.
func (c *conn) onReply(frame []byte, kind byte) {
	p, now := c.p, time.Now()
	data := bytes.Clone(frame)
	p.bump(func(s *Stats) { s.Replies++ })

	c.pmu.Lock()
	defer c.pmu.Unlock()
	at := p.release(ToClient, now)
	if c.unpaired || len(c.pending) == 0 || (kind == '>' && !c.pending[0].switches) {
		// Pub/Sub or an out-of-band push, or a reply to nothing we know of.
		c.toClient.push(item{data: data, at: at})
		return
	}
	e := c.pending[0]
	c.pending[0] = pending{}
	c.pending = c.pending[1:]
	if e.held != nil {
		p.bump(func(*Stats) { e.held.answered++ })
	}
	switch e.kind {
	case KindDropReply:
		c.toClient.push(item{kind: itemClose, at: at})
		p.bump(func(s *Stats) { s.DroppedReplies++ })
	case KindErrorAfter:
		c.toClient.push(item{data: e.reply, at: at})
		p.bump(func(s *Stats) { s.ReplacedReplies++ })
	case KindDelayReply:
		c.toClient.push(item{data: data, at: at.Add(e.delay)})
		p.bump(func(s *Stats) { s.DelayedReplies++ })
	default:
		c.toClient.push(item{data: data, at: at})
	}
	if e.switches {
		c.unpaired, c.pending = true, nil
		return
	}
	for len(c.pending) > 0 && c.pending[0].synthetic {
		c.sendError(c.pending[0].reply, now)
		c.pending[0] = pending{}
		c.pending = c.pending[1:]
	}
}

// endsPairing reports whether cmd makes the server's replies stop
// answering commands one for one.
func endsPairing(cmd Command) bool {
	switch cmd.Name() {
	case "SUBSCRIBE", "PSUBSCRIBE", "SSUBSCRIBE", "UNSUBSCRIBE", "PUNSUBSCRIBE", "SUNSUBSCRIBE",
		"MONITOR", "SYNC", "PSYNC":
		return true
	case "CLIENT":
		return len(cmd.Args) > 1 && strings.EqualFold(cmd.Args[1], "REPLY")
	}
	return false
}
