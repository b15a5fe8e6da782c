package faultproxy

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"
)

// Command is one command a client sent through the proxy, as the proxy
// parsed it.
type Command struct {
	// Args are the command's arguments as sent, the command name first
	// (in the client's case). Never empty. Shared: do not modify.
	Args []string
	// Conn identifies the client connection: 1 for the first connection
	// the proxy set up (accepted and connected to the target), 2 for the
	// next, and so on.
	Conn uint64
}

// Name returns the command name in upper case ("SET", "EVALSHA").
func (c Command) Name() string { return strings.ToUpper(c.Args[0]) }

// Match reports whether a rule applies to a command. It is called with the
// proxy's lock held, from the goroutine reading the command's connection: it
// must be quick, must not modify cmd.Args and must not call methods of the
// Proxy or of its Applied rules (they take the same lock). A lock a Match
// takes is thereby taken inside the proxy's: never hold it while calling
// the Proxy or an Applied (e.g. [Applied.Fired]), or the two deadlock.
type Match func(cmd Command) bool

// Any matches every command, including the ones go-redis sends when it opens
// a connection (HELLO, CLIENT SETINFO ...).
func Any() Match { return func(Command) bool { return true } }

// Named matches commands whose name is one of names (case-insensitive).
func Named(names ...string) Match {
	up := make([]string, len(names))
	for i, n := range names {
		up[i] = strings.ToUpper(n)
	}
	return func(c Command) bool { return slices.Contains(up, c.Name()) }
}

// Scripts matches script calls: EVAL, EVALSHA, EVAL_RO and EVALSHA_RO.
func Scripts() Match { return Named("EVAL", "EVALSHA", "EVAL_RO", "EVALSHA_RO") }

// ScriptSHA matches calls of the script whose SHA1 is sha (40 hex digits,
// any case, as redis.Script.Hash returns): EVALSHA and EVALSHA_RO naming it,
// and EVAL and EVAL_RO whose script body hashes to it, so that a
// redis.Script matches whether go-redis sends it by hash or, after
// NOSCRIPT, by body.
func ScriptSHA(sha string) Match {
	sha = strings.ToLower(sha)
	return func(c Command) bool {
		if len(c.Args) < 2 {
			return false
		}
		switch c.Name() {
		case "EVALSHA", "EVALSHA_RO":
			return strings.ToLower(c.Args[1]) == sha
		case "EVAL", "EVAL_RO":
			h := sha1.Sum([]byte(c.Args[1]))
			return hex.EncodeToString(h[:]) == sha
		}
		return false
	}
}

// Arg matches commands that have value among their arguments after the
// name (a key, a script SHA, a channel ...), compared exactly.
func Arg(value string) Match {
	return func(c Command) bool { return slices.Contains(c.Args[1:], value) }
}

// All matches commands that every one of ms matches.
func All(ms ...Match) Match {
	return func(c Command) bool {
		for _, m := range ms {
			if !m(c) {
				return false
			}
		}
		return true
	}
}

// Kind is a kind of injected fault.
type Kind int

const (
	// KindDropReply is a lost reply: the server ran the command, its reply
	// was discarded and the connection closed (FIN), so the client sees EOF.
	KindDropReply Kind = iota + 1
	// KindDelayReply is a reply held for a while before it is forwarded.
	KindDelayReply
	// KindDelayCommand is a command held for a while before it is forwarded
	// to the server.
	KindDelayCommand
	// KindErrorInstead is an error reply sent instead of forwarding the
	// command: the server never sees it.
	KindErrorInstead
	// KindErrorAfter is an error reply sent in place of the server's reply:
	// the server ran the command, the client sees the error.
	KindErrorAfter
	// KindHoldCommand is a command held until the test lets it through
	// ([Applied.Let]) before it is forwarded to the server.
	KindHoldCommand
)

// String returns the kind's name, e.g. "drop-reply".
func (k Kind) String() string {
	switch k {
	case KindDropReply:
		return "drop-reply"
	case KindDelayReply:
		return "delay-reply"
	case KindDelayCommand:
		return "delay-command"
	case KindErrorInstead:
		return "error-instead"
	case KindErrorAfter:
		return "error-after"
	case KindHoldCommand:
		return "hold-command"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Error replies commonly injected (pass them to [ErrorReply] or
// [Chances].Error). go-redis retries the first three by default.
const (
	// Loading is a server still loading its data set.
	Loading = "LOADING Redis is loading the dataset in memory"
	// ReadOnly is a replica refusing a write (after a failover, say).
	ReadOnly = "READONLY You can't write against a read only replica."
	// TryAgain is a Cluster slot being migrated.
	TryAgain = "TRYAGAIN Multiple keys request during rehashing of slot"
	// Busy is a server running a long script (not retried by go-redis).
	Busy = "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSCRIPT."
)

// Forever, as a rule's count, applies the rule to every matching command.
const Forever = math.MaxInt

// Rule is a fault to inject into the commands a [Match] selects: the next n
// of them (after skipping some, see [Rule.After]), or each with a
// probability ([Random]). Build rules with [DropReply], [DelayReply],
// [DelayCommand], [ErrorReply] or [Random] and install them with
// [Proxy.Apply]. A Rule is a value: it may be applied several times, each
// application counting on its own.
type Rule struct {
	match Match
	kind  Kind
	delay time.Duration
	reply []byte // the error frame for KindErrorInstead/KindErrorAfter
	times int
	skip  int

	random bool
	seed   uint64
	chance Chances
}

// After returns a copy of r that lets the first k matching commands through
// untouched before it applies: DropReply(Named("SET"), 1).After(2) drops the
// reply to the third SET. It panics if k < 0.
func (r Rule) After(k int) Rule {
	if k < 0 {
		panic("faultproxy: Rule.After: negative count")
	}
	r.skip = k
	return r
}

func fixed(m Match, k Kind, n int, what string) Rule {
	if m == nil {
		panic("faultproxy: " + what + ": nil Match (use Any())")
	}
	if n < 1 {
		panic("faultproxy: " + what + ": count must be at least 1 (Forever for every command)")
	}
	return Rule{match: m, kind: k, times: n}
}

// DropReply lets the next n commands matching m reach the server and run,
// then discards each one's reply and closes that client connection (FIN),
// after forwarding the replies that preceded it: the client sees EOF where
// the reply should be (go-redis re-sends the command on a new connection
// unless MaxRetries is -1). n is at least 1, or [Forever]; it panics
// otherwise.
func DropReply(m Match, n int) Rule { return fixed(m, KindDropReply, n, "DropReply") }

// DelayReply holds the reply to each of the next n commands matching m for
// d (on top of any [Proxy.Latency]) before forwarding it. Replies behind it
// on the same connection wait too, as on a real connection. It panics if
// n < 1 or d <= 0.
func DelayReply(m Match, d time.Duration, n int) Rule {
	if d <= 0 {
		panic("faultproxy: DelayReply: duration must be positive")
	}
	r := fixed(m, KindDelayReply, n, "DelayReply")
	r.delay = d
	return r
}

// DelayCommand holds each of the next n commands matching m for d (on top
// of any [Proxy.Latency]) before forwarding it to the server; commands
// behind it on the same connection wait too. A delayed command is a request
// already on its way: it reaches the server even when the client closes
// (or resets) its connection meanwhile, as [HoldCommand]'s. It panics if
// n < 1 or d <= 0.
func DelayCommand(m Match, d time.Duration, n int) Rule {
	if d <= 0 {
		panic("faultproxy: DelayCommand: duration must be positive")
	}
	r := fixed(m, KindDelayCommand, n, "DelayCommand")
	r.delay = d
	return r
}

// HoldCommand holds each of the next n commands matching m, and the
// commands behind it on the same connection, until the test lets them
// through with [Applied.Let] (on top of any [Proxy.Latency]), then
// forwards them to the server: a request delayed in the network (a
// retransmission, a stalled link) that arrives after its client gave up.
// A held command is forwarded even when the client closed or reset its
// connection meanwhile: the proxy keeps the server connection open until
// the held commands have been written, their replies read (and discarded)
// or the server closed it; only [Proxy.CutAll] and [Proxy.Close] discard
// what is held. [Applied.Fired] counts the commands held, and
// [Applied.Answered] those the server has answered since. It panics if
// n < 1.
func HoldCommand(m Match, n int) Rule { return fixed(m, KindHoldCommand, n, "HoldCommand") }

// ErrorReply answers the next n commands matching m with the error reply msg
// (its text without the leading '-', e.g. [Loading] or "ERR injected").
// With forward false the command never reaches the server; with forward
// true the server runs it and its reply is replaced by the error. It panics
// if n < 1 or msg is empty or holds CR or LF.
func ErrorReply(m Match, msg string, forward bool, n int) Rule {
	k := KindErrorInstead
	if forward {
		k = KindErrorAfter
	}
	r := fixed(m, k, n, "ErrorReply")
	r.reply = errorFrame(msg, "ErrorReply")
	return r
}

func errorFrame(msg, what string) []byte {
	if msg == "" || strings.ContainsAny(msg, "\r\n") {
		panic("faultproxy: " + what + ": error message must be one non-empty line")
	}
	return []byte("-" + msg + "\r\n")
}

// Chances are the probabilities of each fault for a [Random] rule. Each is
// in [0, 1] and their sum is at most 1; what remains is the probability
// that the command passes untouched.
type Chances struct {
	DropReply    float64 // as [DropReply]
	ErrorInstead float64 // as [ErrorReply] with forward false
	ErrorAfter   float64 // as [ErrorReply] with forward true
	DelayReply   float64 // as [DelayReply], for Delay

	// Error is the error reply's text for ErrorInstead and ErrorAfter. The
	// default is [Loading].
	Error string
	// Delay is how long DelayReply holds a reply; required (> 0) when
	// DelayReply > 0.
	Delay time.Duration
}

// Random injects, into each command matching m, one fault or none, chosen
// with the probabilities c from a pseudo-random sequence seeded with seed:
// the same seed gives the same decisions for the same sequence of matching
// commands (one draw per matching command, in the order the proxy reads
// them; each [Proxy.Apply] starts the sequence afresh). It applies to every
// matching command; [Rule.After] skips the first ones without drawing. It
// panics if a probability is outside [0, 1], their sum exceeds 1, Error
// holds CR or LF, or Delay is not positive while DelayReply is.
func Random(m Match, seed uint64, c Chances) Rule {
	if m == nil {
		panic("faultproxy: Random: nil Match (use Any())")
	}
	sum := 0.0
	for _, p := range []float64{c.DropReply, c.ErrorInstead, c.ErrorAfter, c.DelayReply} {
		if !(p >= 0 && p <= 1) {
			panic("faultproxy: Random: probability outside [0, 1]")
		}
		sum += p
	}
	if sum > 1+1e-9 {
		panic("faultproxy: Random: probabilities add up to more than 1")
	}
	if c.DelayReply > 0 && c.Delay <= 0 {
		panic("faultproxy: Random: DelayReply needs a positive Delay")
	}
	if c.Error == "" {
		c.Error = Loading
	}
	return Rule{match: m, times: Forever, random: true, seed: seed, chance: c,
		reply: errorFrame(c.Error, "Random"), delay: c.Delay}
}

// draw picks the fault for one matching command of a random rule (0 for
// none), with one draw from rng.
func (r *Rule) draw(rng *rand.Rand) Kind {
	u := rng.Float64()
	for _, o := range []struct {
		p float64
		k Kind
	}{{r.chance.DropReply, KindDropReply}, {r.chance.ErrorInstead, KindErrorInstead},
		{r.chance.ErrorAfter, KindErrorAfter}, {r.chance.DelayReply, KindDelayReply}} {
		if u < o.p {
			return o.k
		}
		u -= o.p
	}
	return 0
}

// Applied is a rule installed on a proxy by [Proxy.Apply]. Its methods are
// safe for concurrent use.
type Applied struct {
	p    *Proxy
	rule Rule
	rng  *rand.Rand // random rules only

	gate    chan struct{} // HoldCommand: closed by Let
	letOnce sync.Once

	// Guarded by p.mu.
	seen     int // matching commands seen (skipped ones included)
	fired    int
	answered int // HoldCommand and DelayCommand: replies read for its commands
	active   bool
	done     chan struct{}
}

// Let lets the commands a [HoldCommand] rule holds, and every one it will
// hold from now on, through to the server (after any latency). It does
// nothing for other rules, and nothing when called again.
func (a *Applied) Let() {
	if a.gate != nil {
		a.letOnce.Do(func() { close(a.gate) })
	}
}

// Answered returns how many of the commands a [HoldCommand] or
// [DelayCommand] rule held the server has answered so far (the reply read
// by the proxy, whether or not the client was still there to get it): once
// it equals [Applied.Fired], every held command has run on the server.
func (a *Applied) Answered() int {
	a.p.mu.Lock()
	defer a.p.mu.Unlock()
	return a.answered
}

// Fired returns how many commands the rule has injected a fault into so
// far (decided when the proxy read the command; see [Proxy.Events]).
func (a *Applied) Fired() int {
	a.p.mu.Lock()
	defer a.p.mu.Unlock()
	return a.fired
}

// Done returns a channel closed once the rule is used up (it has fired its
// n times) or removed ([Applied.Remove], [Proxy.Clear], [Proxy.Close]).
func (a *Applied) Done() <-chan struct{} { return a.done }

// Remove uninstalls the rule; commands already decided keep their fault.
// Removing twice is harmless.
func (a *Applied) Remove() {
	a.p.mu.Lock()
	defer a.p.mu.Unlock()
	a.p.removeRuleLocked(a)
}
