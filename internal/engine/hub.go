package engine

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// channelPrefix starts the name of every Pub/Sub channel the library's
// scripts publish release notifications on: the channel of a key is
// channelPrefix + the prefixed key, and scripts derive it from KEYS[1]
// themselves. ACLs grant it as &coordination:*.
const channelPrefix = "coordination:"

// channel returns the Pub/Sub channel of the prefixed key full.
func channel(full string) string { return channelPrefix + full }

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
}

// Confirmed reports whether the server has confirmed the subscription, so
// that notifications can arrive. It can turn true after Watch returned; it
// stays false when the server refuses the channel (an ACL without the
// coordination:* channels), and waiters should then re-check more often.
func (w *Watch) Confirmed() bool {
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
// bound, when it is slow to confirm). All waiters of one coordinator share
// one Pub/Sub connection, whatever the number of keys and waiters.
//
// Waiters must call Watch first and only then retry their operation: a
// release that happens after Watch returns is never missed (a lost message
// can only delay the waiter until its next periodic re-check).
//
// It returns ctx's error if ctx ends first, the error of the SUBSCRIBE
// command (a permission error when the ACL forbids the channel), or an
// error wrapping [sentinel.ErrClosed] once [Engine.Shutdown] has begun.
func (e *Engine) Watch(ctx context.Context, full string) (*Watch, error) {
	return e.hub.watch(ctx, channel(full))
}

type chanState struct {
	waiters map[*Watch]struct{}
	pending int           // SUBSCRIBE commands sent and not yet confirmed
	ready   chan struct{} // closed at the first confirmation
	readyOK bool
}

// hub multiplexes every waiter of a coordinator onto one *redis.PubSub. The
// connection exists only while someone waits.
type hub struct {
	e *Engine

	subMu  sync.Mutex // serialises SUBSCRIBE/UNSUBSCRIBE and the PubSub's life
	ps     *redis.PubSub
	done   chan struct{} // closed when the dispatcher of ps has ended
	closed bool          // Shutdown closed the hub: no new subscription

	mu    sync.Mutex // guards chans; held only briefly, never across I/O
	chans map[string]*chanState
}

func newHub(e *Engine) *hub {
	return &hub{e: e, chans: map[string]*chanState{}}
}

func (h *hub) watch(ctx context.Context, ch string) (*Watch, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	w := &Watch{h: h, ch: ch, c: make(chan struct{}, 1)}

	h.subMu.Lock()
	if h.closed {
		h.subMu.Unlock()
		return nil, errShutdown
	}
	h.mu.Lock()
	st := h.chans[ch]
	fresh := st == nil
	if fresh {
		st = &chanState{waiters: map[*Watch]struct{}{}, ready: make(chan struct{})}
		h.chans[ch] = st
		st.pending++
	}
	st.waiters[w] = struct{}{}
	w.st = st
	h.mu.Unlock()

	if fresh {
		if h.ps == nil {
			h.ps = h.e.client.Subscribe(ctx)
			h.done = make(chan struct{})
			go h.dispatch(h.ps, h.done)
		}
		if err := h.ps.Subscribe(ctx, ch); err != nil {
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

// Waiters returns the number of registered [Watch]es: the waiters blocked
// on a notification of this engine, for tests.
func (e *Engine) Waiters() int {
	h := e.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, st := range h.chans {
		n += len(st.waiters)
	}
	return n
}

// close closes the shared Pub/Sub connection for good, waiting for its
// dispatcher to end, and wakes every waiter: later watches fail with an
// error wrapping sentinel.ErrClosed. The registrations left are forgotten (their
// Close does nothing).
func (h *hub) close() {
	h.subMu.Lock()
	defer h.subMu.Unlock()
	h.closed = true
	if h.ps != nil {
		_ = h.ps.Close()
		<-h.done
		h.ps, h.done = nil, nil
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
	empty := len(h.chans) == 0
	h.mu.Unlock()
	if !last || h.ps == nil {
		return
	}
	if empty {
		_ = h.ps.Close()
		<-h.done
		h.ps, h.done = nil, nil
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	_ = h.ps.Unsubscribe(ctx, w.ch)
	cancel()
}

// healthCheck is how long the shared subscription may be silent before
// the dispatcher pings it (go-redis' Channel uses the same period).
const healthCheck = 3 * time.Second

// dispatch delivers messages and subscription confirmations of ps until ps
// is closed. It reads ps itself (not through go-redis' Channel, whose
// goroutine would add a hand-off between the socket and the waiter). go-redis
// reconnects and re-subscribes on its own; a re-subscription confirmation
// wakes the channel's waiters because a message may have been lost while
// disconnected.
func (h *hub) dispatch(ps *redis.PubSub, done chan struct{}) {
	defer close(done)
	heard := make(chan struct{}, 1)
	stop := make(chan struct{})
	defer close(stop)
	go ping(ps, heard, stop)
	failures := 0
	for {
		m, err := ps.Receive(context.Background())
		if err != nil {
			if errors.Is(err, redis.ErrClosed) {
				return
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
			h.wake(m.Channel)
		case *redis.Subscription:
			if m.Kind != "subscribe" {
				continue
			}
			h.mu.Lock()
			st := h.chans[m.Channel]
			if st != nil {
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
			h.mu.Unlock()
		}
	}
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

func (h *hub) wake(ch string) {
	h.mu.Lock()
	if st := h.chans[ch]; st != nil {
		h.signal(st)
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
