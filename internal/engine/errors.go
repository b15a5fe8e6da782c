package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"strconv"
	"strings"
	"syscall"

	"github.com/coordkit/coordination/internal/sentinel"
	"github.com/redis/go-redis/v9"
)

// keyedError is an error of a script or command run on keys: it carries the
// first key as the caller gave it to [Op.End], and reads as the error it
// wraps.
type keyedError struct {
	key, field string
	err        error
}

// Error returns the wrapped error's message.
func (e *keyedError) Error() string { return e.err.Error() }

// Unwrap returns the error this one wraps, for errors.Is and errors.As.
func (e *keyedError) Unwrap() error { return e.err }

// keyed wraps err with the keys' name (err unchanged when nil or unnamed).
func (k Keys) keyed(err error) error {
	if err == nil || !k.named {
		return err
	}
	return &keyedError{key: k.name, field: k.field, err: err}
}

// opError is the error of a public operation: it names the operation and
// the key as the caller gave it, and wraps the cause.
type opError struct {
	op, key string
	named   bool   // key is set
	field   string // a part of the key, named after it; see Keys.Field
	err     error
}

// maxKeyInError bounds the bytes of a key an error message quotes.
const maxKeyInError = 200

// Error returns `coordination: OPERATION "KEY": CAUSE`, the operation in
// lower case and the cause without its own "coordination: " prefix.
func (e *opError) Error() string {
	var b strings.Builder
	b.WriteString("coordination: ")
	b.WriteString(strings.ToLower(e.op))
	if e.named {
		k := e.key
		if len(k) > maxKeyInError {
			k = k[:maxKeyInError]
		}
		b.WriteByte(' ')
		b.WriteString(strconv.Quote(k))
		if len(k) < len(e.key) {
			b.WriteString("...")
		}
		if f := e.field; f != "" {
			b.WriteString(" field ")
			b.WriteString(strconv.Quote(f[:min(len(f), maxKeyInError)]))
			if len(f) > maxKeyInError {
				b.WriteString("...")
			}
		}
	}
	b.WriteString(": ")
	b.WriteString(unprefixed(e.op, e.err.Error()))
	return b.String()
}

// unprefixed returns msg, the message of an operation's cause, without the
// prefixes that would repeat what the operation's name says: any number of
// "coordination: " and "PACKAGE: " (a word the operation's name, lower
// case without spaces, begins with: the primitive's package), so every
// message reads `coordination: OP "KEY": CAUSE` once.
func unprefixed(op, msg string) string {
	pkg := strings.ReplaceAll(strings.ToLower(op), " ", "")
	for {
		word, rest, ok := strings.Cut(msg, ": ")
		if !ok || word == "" || strings.ContainsAny(word, " \"") || (word != "coordination" && !strings.HasPrefix(pkg, word)) {
			return msg
		}
		msg = rest
	}
}

// Unwrap returns the error this one wraps, for errors.Is and errors.As.
func (e *opError) Unwrap() error { return e.err }

// OpError returns err naming the operation op (a hooks operation name,
// e.g. "LOCK ACQUIRE") and the key: the one a script or command run on
// keys recorded in err, or else the first of keys (none for keys without
// a name). It matches everything err matches. An error that names an
// operation already is returned as is; so is nil.
func OpError(op string, keys Keys, err error) error {
	if err == nil {
		return nil
	}
	var oe *opError
	if errors.As(err, &oe) {
		return err
	}
	e := &opError{op: op, key: keys.name, named: keys.named, field: keys.field, err: err}
	var ke *keyedError
	if errors.As(err, &ke) {
		e.key, e.named, e.field = ke.key, true, ke.field
	}
	return e
}

// NameOp is [OpError] for an error type whose cause already names the
// operation (a refusal carrying the failure of the same operation): it
// names the operation and the key whatever err wraps, and its message
// quotes the cause of a directly wrapped named error without its name
// ([Unnamed]).
func NameOp(op string, keys Keys, err error) error {
	if err == nil {
		return nil
	}
	return &opError{op: op, key: keys.name, named: keys.named, field: keys.field, err: err}
}

// Unnamed returns the cause of an error [OpError] named, and err itself
// for any other error: for quoting the cause in a message that names the
// operation already.
func Unnamed(err error) error {
	if oe, ok := err.(*opError); ok {
		return oe.err
	}
	return err
}

// operationOf returns the operation name and the key an error of a public
// operation names (see [OpError]), and false for any other error.
func operationOf(err error) (op, key string, ok bool) {
	var oe *opError
	if errors.As(err, &oe) {
		return oe.op, oe.key, true
	}
	return "", "", false
}

// scriptError is an error reply raised by one of the library's scripts with
// a stable code (the first word of the reply, e.g. COORD_BADCOUNTER).
type scriptError struct {
	code, detail string
}

// scriptCodes maps each script error code to the sentinels it matches.
var scriptCodes = map[string][]error{
	"COORD_CROSSSLOT":         {sentinel.ErrInvalidArgument},
	"COORD_BADCOUNTER":        {sentinel.ErrBadState},
	"COORD_OVERFLOW":          {sentinel.ErrBadState},
	"COORD_WRONGTYPE":         {sentinel.ErrBadState},
	"COORD_BADSTATE":          {sentinel.ErrBadState},
	"COORD_CAPACITY_MISMATCH": {sentinel.ErrConfigMismatch},
	"COORD_CONFIG_MISMATCH":   {sentinel.ErrConfigMismatch},
	"COORD_UNSUPPORTED":       {sentinel.ErrUnsupportedServer},
	"COORD_BADARG":            {sentinel.ErrInvalidArgument},
}

// Error returns the error's message.
func (e *scriptError) Error() string { return "coordination: " + e.detail + " (" + e.code + ")" }

// Is reports whether target is the sentinel this error stands for.
func (e *scriptError) Is(target error) bool {
	for _, s := range scriptCodes[e.code] {
		if s == target {
			return true
		}
	}
	return false
}

// scriptCode returns the COORD_ code of a script error, and false for any
// other error.
func scriptCode(err error) (string, bool) {
	var se *scriptError
	if errors.As(err, &se) {
		return se.code, true
	}
	return "", false
}

// codeOf returns the COORD_ code of a script error, "" for any other.
func codeOf(err error) string { c, _ := scriptCode(err); return c }

// mapErr turns an error reply carrying one of the library's script codes
// (COORD_...) into a script error matching the code's sentinels, and a
// WRONGTYPE reply raised inside a script into one matching sentinel.ErrBadState
// (COORD_WRONGTYPE); every other error is returned unchanged. Script runs apply
// it to every reply.
func mapErr(err error) error {
	var re redis.Error
	if err == nil || !errors.As(err, &re) {
		return err
	}
	msg := re.Error()
	// miniredis prefixes script errors with "ERR Error ...: "; real servers
	// return the script's text as is. Look for the code anywhere.
	if i := strings.Index(msg, "COORD_"); i >= 0 {
		code, detail, _ := strings.Cut(msg[i:], " ")
		if _, ok := scriptCodes[code]; ok {
			return &scriptError{code: code, detail: detail}
		}
		return err
	}
	// A command the ACL denies inside a script: every server says it in
	// its own words ("ERR ACL failure in script: ... no permissions to run
	// the 'get' command" on Redis 8 and Valkey, "ERR The user executing the
	// script can't run this command or subcommand" on Redis 7.0). Report it
	// the way the server reports a denied command outside a script: NOPERM.
	if !strings.HasPrefix(msg, "NOPERM") && (strings.Contains(msg, "ACL failure in script") ||
		strings.Contains(msg, "user executing the script can't run this command")) {
		return permissionError{msg: msg}
	}
	// A redis.call on a key of another type raises WRONGTYPE out of the
	// script (before any write: scripts read before they write).
	if strings.HasPrefix(msg, "WRONGTYPE") || (strings.HasPrefix(msg, "ERR Error") && strings.Contains(msg, "WRONGTYPE")) {
		return &scriptError{code: "COORD_WRONGTYPE", detail: "key holds the wrong Redis type"}
	}
	return err
}

// permissionError is a denied command inside a script, reported as the
// server reports one outside a script: a NOPERM error reply (terminal).
type permissionError struct{ msg string }

// Error returns the error's message.
func (e permissionError) Error() string { return "NOPERM " + strings.TrimPrefix(e.msg, "ERR ") }

// RedisError marks the error as a server reply (go-redis' redis.Error).
func (permissionError) RedisError() {}

// errorClass says how a retry loop should treat an error
// (coordination.IsTransient reports Classify(err) == Transient).
type errorClass int

// The error classes.
const (
	noError errorClass = iota
	Transient
	Terminal
	Canceled
)

var transientPrefixes = []string{"LOADING", "BUSY", "TRYAGAIN", "CLUSTERDOWN", "MASTERDOWN", "READONLY", "NOREPLICAS",
	"ERR max number of clients reached"}

// transientReply reports whether the error reply re is one of
// transientPrefixes: the server refused the command before running it,
// for now.
func transientReply(re redis.Error) bool {
	msg := re.Error()
	for _, p := range transientPrefixes {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// Classify sorts an error into one class: the one place the library decides
// what to retry.
func Classify(err error) errorClass {
	if err == nil {
		return noError
	}
	var g *gaveUpError
	if errors.As(err, &g) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return Canceled
	}
	var se *scriptError
	if errors.As(err, &se) || errors.Is(err, sentinel.ErrInvalidArgument) || errors.Is(err, sentinel.ErrClosed) || errors.Is(err, redis.ErrClosed) {
		return Terminal
	}
	var re redis.Error
	if errors.As(err, &re) {
		if transientReply(re) {
			return Transient
		}
		return Terminal
	}
	if errors.Is(err, redis.ErrPoolTimeout) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return Transient
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, sentinel.ErrNotReplicated) {
		return Transient
	}
	return Terminal
}

// IsAmbiguous reports whether a write may have happened although the caller
// saw err, assuming the client may re-send (go-redis' default): every
// cancellation, and every transient error, since go-redis re-sends after a
// lost reply and the error the caller sees is the last attempt's, whatever
// the first attempt did; except an error that proves nothing was sent
// ([isUnsent]: a failed dial, a connection-pool timeout). Terminal errors
// are not ambiguous: the server refused (or the command was never built).
func IsAmbiguous(err error) bool {
	switch Classify(err) {
	case Canceled, Transient:
		return !isUnsent(err)
	}
	return false
}

// isUnsent reports whether err proves that the command it ended was not
// written to any server: a failed dial (go-redis' dialer returns a
// *net.OpError with Op "dial" for a refused connection, a name that does
// not resolve and a dial timeout, and hands on the last one while the pool
// refuses to dial after repeated failures) or a connection-pool timeout
// (redis.ErrPoolTimeout: no connection was free). go-redis re-sends only
// after a write error, an EOF or a reset on a pooled connection, which the
// server closed before reading the command in every case but one: a server
// that ran the command and became unreachable before the re-send (a crash
// or a failover within the retry backoff). That case is reported unsent
// too; what it wrote expires at its TTL. An error joining several (one per
// node of a Redlock group) is unsent only when each of them is.
func isUnsent(err error) bool {
	for err != nil {
		if op, ok := err.(*net.OpError); ok {
			return op.Op == "dial"
		}
		if err == redis.ErrPoolTimeout {
			return true
		}
		if m, ok := err.(interface{ Unwrap() []error }); ok {
			errs := m.Unwrap()
			for _, e := range errs {
				if !isUnsent(e) {
					return false
				}
			}
			return len(errs) > 0
		}
		err = errors.Unwrap(err)
	}
	return false
}

// neverSent reports whether err proves that this attempt did not run on the
// server: an error reply, or [isUnsent].
func neverSent(err error) bool {
	var re redis.Error
	if errors.As(err, &re) {
		return true
	}
	return isUnsent(err) || errors.Is(err, syscall.ECONNREFUSED)
}

// gaveUp returns the error of a blocking operation that gave up because ctx
// ended: it matches both [sentinel.ErrNotAcquired] and context.Cause(ctx) with
// errors.Is, and reads as one line.
func gaveUp(ctx context.Context) error {
	return &gaveUpError{cause: context.Cause(ctx)}
}

type gaveUpError struct{ cause error }

// Error returns the error's message.
func (e *gaveUpError) Error() string {
	if e.cause == nil {
		return sentinel.ErrNotAcquired.Error()
	}
	return sentinel.ErrNotAcquired.Error() + ": " + e.cause.Error()
}

// Unwrap returns the error this one wraps, for errors.Is and errors.As.
func (e *gaveUpError) Unwrap() []error { return []error{sentinel.ErrNotAcquired, e.cause} }

// Ended returns the error of an operation whose context ended before it
// asked Redis anything (nothing was refused, nothing failed): ctx's cause,
// which, when the caller gave one (context.WithCancelCause), also matches
// ctx.Err() with errors.Is, so that [Classify] calls it a cancellation
// whatever the cause. It reads as the cause.
func Ended(ctx context.Context) error {
	cause, err := context.Cause(ctx), ctx.Err()
	if cause == nil || cause == err {
		return err
	}
	return &endedError{cause: cause, err: err}
}

type endedError struct{ cause, err error }

// Error returns the cause's message.
func (e *endedError) Error() string { return e.cause.Error() }

// Unwrap returns the cause and the context's error, for errors.Is and
// errors.As.
func (e *endedError) Unwrap() []error { return []error{e.cause, e.err} }

// Describe returns a one-line description of err that is safe for a
// default log line: the error class, the server's error reply (its text
// up to the first newline and at most 200 bytes; Redis error replies name
// commands, never keys or passwords) or, for network errors, the failing
// operation and the system error without addresses. Errors of the library
// itself are described by their text, which never holds keys or tokens.
func Describe(err error) string {
	if err == nil {
		return ""
	}
	var oe *opError
	if errors.As(err, &oe) {
		// The key can be a secret or personal data: describe the cause.
		return Describe(oe.err)
	}
	class := Classify(err).String()
	var re redis.Error
	var se *scriptError
	switch {
	case errors.As(err, &se):
		return class + ": " + se.Error()
	case errors.As(err, &re):
		msg := re.Error()
		if i := strings.IndexAny(msg, "\r\n"); i >= 0 {
			msg = msg[:i]
		}
		// Permission errors name the ACL user: an identity, kept out.
		msg = aclUser.ReplaceAllString(msg, "${1}<user>${2}")
		if len(msg) > 200 {
			msg = msg[:200] + "..."
		}
		return class + ": server replied " + msg
	}
	var op *net.OpError
	if errors.As(err, &op) {
		inner := op.Err
		var sc *net.DNSError
		if errors.As(inner, &sc) {
			return class + ": " + op.Op + ": name resolution failed"
		}
		var sys syscall.Errno
		if errors.As(inner, &sys) {
			return class + ": " + op.Op + ": " + sys.Error()
		}
		if op.Timeout() {
			return class + ": " + op.Op + ": i/o timeout"
		}
		return class + ": " + op.Op + " failed"
	}
	switch {
	case errors.Is(err, redis.ErrPoolTimeout):
		return class + ": connection pool timeout"
	case errors.Is(err, redis.ErrClosed):
		return class + ": client is closed"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return class + ": connection closed by the server"
	case errors.Is(err, context.Canceled):
		return class + ": context canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return class + ": context deadline exceeded"
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return class + ": i/o timeout"
	}
	if errors.Is(err, sentinel.ErrInvalidArgument) || errors.Is(err, sentinel.ErrBadState) || errors.Is(err, sentinel.ErrClosed) ||
		errors.Is(err, sentinel.ErrNotReplicated) {
		return class + ": " + err.Error()
	}
	return class + ": " + fmt.Sprintf("%T", err)
}

// aclUser matches the user name in a server's permission error ("User
// alice has no permissions ...").
var aclUser = regexp.MustCompile(`\b(User )\S+( has)`)

// String returns "none", "transient", "terminal" or "canceled".
func (c errorClass) String() string {
	switch c {
	case noError:
		return "none"
	case Transient:
		return "transient"
	case Terminal:
		return "terminal"
	case Canceled:
		return "canceled"
	default:
		return fmt.Sprintf("errorClass(%d)", int(c))
	}
}
