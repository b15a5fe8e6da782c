// Package cliconn connects the command-line tools (cmd/coordctl and the
// programs under examples/) to a server the same way: the same flags
// (--redis URL, --cluster ADDRS, --sentinel MASTER@ADDRS), the same
// environment variable ([EnvURL]), the same checks, and errors that never
// carry a password.
//
// A connection error is one of two kinds, so that every tool can map it to
// the same exit status: a [UsageError] (the flags or the URL are wrong:
// exit 2) or a [ConnError] (the server could not be reached, or refused to
// authenticate: exit 3). Their messages name the flag, give an example
// value, and show URLs with the password replaced by "xxxxx".
package cliconn

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// EnvURL is the one environment variable every tool reads: the default of
// --redis (a redis://, rediss:// or unix:// URL).
const EnvURL = "COORD_REDIS_URL"

// Example values shown in error messages and usage text.
const (
	ExampleURL      = "redis://user:PASSWORD@127.0.0.1:6379/0"
	ExampleCluster  = "127.0.0.1:7000,127.0.0.1:7001"
	ExampleSentinel = "mymaster@127.0.0.1:26379,127.0.0.1:26380"
)

// PingTimeout bounds the first PING of Connect.
const PingTimeout = 3 * time.Second

// Flags are the connection flags. The zero value means "not given".
type Flags struct {
	URL      string // --redis
	Cluster  string // --cluster: [redis[s]://[user:pass@]]host:port,host:port
	Sentinel string // --sentinel: [redis[s]://[user:pass@]]master@host:port,host:port
}

// Register adds --redis, --cluster and --sentinel to fs. The environment
// is read by Resolve, not shown as a default: a URL may carry a password,
// and -h must not print it.
func (f *Flags) Register(fs *flag.FlagSet) {
	fs.StringVar(&f.URL, "redis", "", "server URL, e.g. redis://user:PASSWORD@127.0.0.1:6379/0 or rediss://... for TLS (default $"+EnvURL+")")
	fs.StringVar(&f.Cluster, "cluster", "", "Redis Cluster seed nodes instead of --redis, e.g. 127.0.0.1:7000,127.0.0.1:7001 (prefix rediss://user:PASSWORD@ for TLS and ACL)")
	fs.StringVar(&f.Sentinel, "sentinel", "", "Sentinel master name and sentinels instead of --redis, e.g. mymaster@127.0.0.1:26379 (prefix rediss://user:PASSWORD@ for the data nodes)")
}

// Given reports whether a server was named by a flag or the environment
// (after Resolve).
func (f *Flags) Given() bool { return f.URL != "" || f.Cluster != "" || f.Sentinel != "" }

// Resolve applies the environment default ($COORD_REDIS_URL for --redis
// when no connection flag is given) and checks that at most one of the
// three flags is given. Its error is a *UsageError.
func (f *Flags) Resolve() error {
	n := 0
	for _, v := range []string{f.URL, f.Cluster, f.Sentinel} {
		if v != "" {
			n++
		}
	}
	if n > 1 {
		return usagef("give one of --redis, --cluster and --sentinel, not several")
	}
	if n == 0 {
		f.URL = os.Getenv(EnvURL)
	}
	return nil
}

// Secrets returns the passwords the flags carry (for [Redact]).
func (f *Flags) Secrets() []string {
	var s []string
	for _, v := range []string{f.URL, f.Cluster, f.Sentinel} {
		s = append(s, SecretsIn(v)...)
	}
	return s
}

// UsageError is a wrong flag or URL: exit status 2.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

func usagef(format string, a ...any) error { return &UsageError{Msg: fmt.Sprintf(format, a...)} }

// ConnError is a server that could not be reached, or that refused the
// connection's authentication: exit status 3. Its message carries no
// password; Unwrap returns the underlying error (which may name an
// address, never a password).
type ConnError struct {
	Msg string
	Err error
}

func (e *ConnError) Error() string { return e.Msg }

// Unwrap returns the underlying error.
func (e *ConnError) Unwrap() error { return e.Err }

// Client is a connected client and a description of the server that is
// safe to print.
type Client struct {
	redis.UniversalClient
	Desc string
}

// Options returns the go-redis options for the flags (after Resolve),
// without connecting. The error is a *UsageError; its message names the
// flag and shows an example. With no server named it returns nil options
// and a nil error.
func (f *Flags) Options() (*redis.UniversalOptions, string, error) {
	switch {
	case f.Cluster != "":
		scheme, user, pass, rest, err := splitCreds("--cluster", f.Cluster)
		if err != nil {
			return nil, "", err
		}
		addrs, err := splitAddrs("--cluster", rest, ExampleCluster)
		if err != nil {
			return nil, "", err
		}
		o := &redis.UniversalOptions{Addrs: addrs, Username: user, Password: pass, IsClusterMode: true}
		if scheme == "rediss" {
			o.TLSConfig = tlsFor(addrs[0])
		}
		return o, fmt.Sprintf("Redis Cluster (%d seed nodes)", len(addrs)), nil
	case f.Sentinel != "":
		scheme, user, pass, rest, err := splitCreds("--sentinel", f.Sentinel)
		if err != nil {
			return nil, "", err
		}
		master, list, ok := strings.Cut(rest, "@")
		if !ok || master == "" {
			return nil, "", usagef("--sentinel: want MASTER@host:port,..., e.g. --sentinel %s", ExampleSentinel)
		}
		addrs, err := splitAddrs("--sentinel", list, ExampleSentinel)
		if err != nil {
			return nil, "", err
		}
		o := &redis.UniversalOptions{Addrs: addrs, MasterName: master, Username: user, Password: pass}
		if scheme == "rediss" {
			o.TLSConfig = tlsFor(addrs[0])
		}
		return o, fmt.Sprintf("Sentinel master %q", master), nil
	case f.URL != "":
		opt, err := parseURL(f.URL)
		if err != nil {
			return nil, "", err
		}
		o := &redis.UniversalOptions{
			Addrs: []string{opt.Addr}, Username: opt.Username, Password: opt.Password, DB: opt.DB,
			TLSConfig: opt.TLSConfig, Protocol: opt.Protocol, ClientName: opt.ClientName,
			DialTimeout: opt.DialTimeout, ReadTimeout: opt.ReadTimeout, WriteTimeout: opt.WriteTimeout,
			MaxRetries: opt.MaxRetries, PoolSize: opt.PoolSize,
		}
		if opt.Network == "unix" {
			o.Dialer = func(ctx context.Context, _, addr string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", addr)
			}
		}
		return o, "server " + opt.Addr, nil
	}
	return nil, "", nil
}

// contextTimeouts makes go-redis honour the context's deadline on the
// socket: a tool that bounds a release by what is left of a lease must not
// wait out the 3s read timeout (and its retries) on a server that stopped
// answering.
//
// It also dials once per attempt instead of go-redis' five: a tool reports
// an unreachable server at once.
func contextTimeouts(o *redis.UniversalOptions) *redis.UniversalOptions {
	o.ContextTimeoutEnabled = true
	o.DialerRetries = 1
	return o
}

// tlsFor returns the TLS configuration of a rediss:// connection to addr.
func tlsFor(addr string) *tls.Config {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	return &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
}

// parseURL parses a --redis URL with messages of its own: go-redis' and
// net/url's errors quote the whole URL, password included.
func parseURL(raw string) (*redis.Options, error) {
	const want = "want redis://[user:PASSWORD@]host:port/db, rediss://... (TLS) or unix:///path/to/socket"
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return nil, usagef("--redis %s: no scheme; %s, e.g. --redis %s", RedactURL(raw), want, ExampleURL)
	}
	switch scheme {
	case "redis", "rediss", "unix":
	default:
		return nil, usagef("--redis: scheme %q is not supported; %s, e.g. --redis %s", scheme, want, ExampleURL)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, usagef("--redis %s: %s; %s, e.g. --redis %s", RedactURL(raw), urlProblem(err, rest), want, ExampleURL)
	}
	opt, err := redis.ParseURL(u.String())
	if err != nil {
		// go-redis' own messages name a database, a path or a query
		// parameter; they may quote the path, never the userinfo, but
		// redact anyway.
		msg := strings.TrimPrefix(err.Error(), "redis: ")
		return nil, usagef("--redis %s: %s; %s", RedactURL(raw), Redact(msg, SecretsIn(raw)), want)
	}
	return opt, nil
}

// urlProblem describes a net/url parse error without quoting the URL.
func urlProblem(err error, rest string) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		msg := ue.Err.Error()
		if strings.Contains(msg, "invalid port") {
			return "the port is not a number"
		}
		if strings.Contains(msg, "invalid character") || strings.Contains(msg, "invalid userinfo") {
			return "a character in the address or the password is not allowed (percent-encode it, e.g. @ as %40)"
		}
		if strings.Contains(msg, "escape") {
			return "a bad percent-escape"
		}
	}
	_ = rest
	return "not a valid URL"
}

// splitCreds splits an optional "redis[s]://[user:pass@]" prefix off a
// --cluster or --sentinel value.
func splitCreds(flagName, v string) (scheme, user, pass, rest string, err error) {
	scheme, rest, ok := strings.Cut(v, "://")
	if !ok {
		return "redis", "", "", v, nil
	}
	if scheme != "redis" && scheme != "rediss" {
		return "", "", "", "", usagef("%s: scheme %q is not supported; want redis:// or rediss:// before the addresses, e.g. %s rediss://user:PASSWORD@%s", flagName, scheme, flagName, ExampleCluster)
	}
	// The userinfo ends at the first '@' for --cluster (addresses have no
	// '@'), and at the first of two for --sentinel (MASTER@addrs follows).
	at := strings.Index(rest, "@")
	if at < 0 || (flagName == "--sentinel" && strings.Count(rest, "@") < 2) {
		return scheme, "", "", rest, nil
	}
	info := rest[:at]
	u, perr := url.Parse("redis://" + info + "@x")
	if perr != nil || u.User == nil {
		return "", "", "", "", usagef("%s: the user:password part is not valid (percent-encode special characters, e.g. @ as %%40)", flagName)
	}
	pass, _ = u.User.Password()
	return scheme, u.User.Username(), pass, rest[at+1:], nil
}

// splitAddrs splits a comma-separated host:port list.
func splitAddrs(flagName, list, example string) ([]string, error) {
	var addrs []string
	for a := range strings.SplitSeq(list, ",") {
		a = strings.TrimSpace(a)
		if a == "" {
			continue
		}
		if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
			return nil, usagef("%s: %q is not host:port, e.g. %s %s", flagName, a, flagName, example)
		}
		addrs = append(addrs, a)
	}
	if len(addrs) == 0 {
		return nil, usagef("%s: no address given, e.g. %s %s", flagName, flagName, example)
	}
	return addrs, nil
}

// Connect resolves nothing (call Resolve first), builds a client for the
// flags and pings it within PingTimeout. With no server named it returns
// a *UsageError saying how to name one. The error is a *UsageError or a
// *ConnError; neither carries a password.
func (f *Flags) Connect(ctx context.Context) (*Client, error) {
	o, desc, err := f.Options()
	if err != nil {
		return nil, err
	}
	if o != nil {
		o = contextTimeouts(o)
	}
	if o == nil {
		return nil, usagef("no server: give --redis URL (e.g. --redis %s), --cluster or --sentinel, or set %s", ExampleURL, EnvURL)
	}
	var c redis.UniversalClient
	switch {
	case o.IsClusterMode:
		c = redis.NewClusterClient(o.Cluster())
	case o.MasterName != "":
		c = redis.NewFailoverClient(o.Failover())
	default:
		c = redis.NewClient(o.Simple())
	}
	if err := Ping(ctx, c, o.Password != ""); err != nil {
		_ = c.Close()
		return nil, &ConnError{Msg: Redact(err.Error(), f.Secrets()), Err: err}
	}
	return &Client{UniversalClient: c, Desc: desc}, nil
}

// Open resolves the flags (see Resolve) and connects: to the server they
// name, pinged (see Connect), or, when none is named and embedded is true,
// to a fresh embedded miniredis. close releases the client (and the
// embedded server).
func (f *Flags) Open(ctx context.Context, embedded bool) (c *Client, close func(), err error) {
	if err := f.Resolve(); err != nil {
		return nil, nil, err
	}
	if !f.Given() && embedded {
		e, err := StartEmbedded()
		if err != nil {
			return nil, nil, err
		}
		return &Client{UniversalClient: e.Client, Desc: "embedded miniredis (give --redis URL or $" + EnvURL + " for a real server)"}, e.Close, nil
	}
	c, err = f.Connect(ctx)
	if err != nil {
		return nil, nil, err
	}
	return c, func() { _ = c.Close() }, nil
}

// ExitCode is the exit status for an error of Open, Connect or the work
// that followed: 0 for nil, 2 for a *UsageError or flag.ErrHelp, 3 for a
// connection error (IsConnError), 1 otherwise. coordctl and the examples
// exit with it.
func ExitCode(err error) int {
	var ue *UsageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ue), errors.Is(err, flag.ErrHelp):
		return 2
	case IsConnError(err):
		return 3
	}
	return 1
}

// Ping pings c within PingTimeout and returns an error that says what to
// do: for an authentication failure, how to give a password.
// hadPassword says whether the connection gave one.
func Ping(ctx context.Context, c redis.UniversalClient, hadPassword bool) error {
	ctx, cancel := context.WithTimeout(ctx, PingTimeout)
	defer cancel()
	err := c.Ping(ctx).Err()
	if err == nil {
		return nil
	}
	return describeConnErr(err, hadPassword)
}

func describeConnErr(err error, hadPassword bool) error {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "NOAUTH"):
		return fmt.Errorf("the server wants a password (NOAUTH): give it in the URL, e.g. --redis %s (percent-encode special characters, e.g. @ as %%40), or in $%s", ExampleURL, EnvURL)
	case strings.Contains(msg, "WRONGPASS"), strings.Contains(msg, "invalid password"), strings.Contains(msg, "invalid username-password"):
		return fmt.Errorf("the server refused the user name or password (WRONGPASS): check the user:PASSWORD part of the URL, e.g. --redis %s", ExampleURL)
	case strings.Contains(msg, "NOPERM"):
		return fmt.Errorf("the server's ACL denies this user a command coordctl needs (NOPERM): %v", err)
	case strings.Contains(msg, "without any password configured") || strings.Contains(msg, "AUTH <password> called"):
		return fmt.Errorf("the URL gives a password but the server has none configured: remove user:PASSWORD@ from the URL")
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded):
		return fmt.Errorf("cannot reach the server: no answer within %v (is the address right? does it need rediss:// for TLS?)", PingTimeout)
	}
	_ = hadPassword
	return fmt.Errorf("cannot reach the server: %v", err)
}

// IsConnError reports whether err (from any command, not only Connect)
// means the server could not be reached or refused authentication: a
// *ConnError, a network error, a timeout, a closed connection or an
// authentication or permission error reply.
func IsConnError(err error) bool {
	if err == nil {
		return false
	}
	var ce *ConnError
	if errors.As(err, &ce) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	if errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, redis.ErrClosed) || errors.Is(err, redis.ErrPoolTimeout) {
		return true
	}
	msg := err.Error()
	for _, s := range []string{"NOAUTH", "WRONGPASS", "NOPERM", "connection refused", "connection reset", "broken pipe", "EOF", "i/o timeout", "no such host"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// SecretsIn returns the password in a URL-like value (a --redis URL, or
// a --cluster or --sentinel value with a redis[s]:// prefix), found even
// when the value does not parse: the text between "scheme://" (or the
// start) and the last '@', after its first ':'; both the raw and the
// percent-decoded form.
func SecretsIn(v string) []string {
	_, rest, ok := strings.Cut(v, "://")
	if !ok {
		rest = v
	}
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return nil
	}
	info := rest[:at]
	// --sentinel: user:pass@master@addrs; the userinfo ends at the first '@'.
	if strings.Count(rest, "@") >= 2 {
		info = rest[:strings.Index(rest, "@")]
	}
	_, pass, ok := strings.Cut(info, ":")
	if !ok || pass == "" {
		// A userinfo without ':' is a password to go-redis (redis://secret@host).
		pass = info
	}
	if pass == "" {
		return nil
	}
	out := []string{pass}
	if dec, err := url.PathUnescape(pass); err == nil && dec != pass {
		out = append(out, dec)
	}
	return out
}

// Redact replaces every secret in s by "xxxxx".
func Redact(s string, secrets []string) string {
	for _, p := range secrets {
		if len(p) > 0 {
			s = strings.ReplaceAll(s, p, "xxxxx")
		}
	}
	return s
}

// RedactURL returns v with its password replaced by "xxxxx" (see
// SecretsIn); values without one are returned unchanged.
func RedactURL(v string) string { return Redact(v, SecretsIn(v)) }

// Embedded is an in-process miniredis whose clock follows the wall clock
// (miniredis otherwise never expires keys on its own), for tools that run
// without a server.
type Embedded struct {
	Mini   *miniredis.Miniredis
	Client *redis.Client
	done   chan struct{}
	ticked chan struct{}
}

// StartEmbedded starts an embedded server; Close stops it.
func StartEmbedded() (*Embedded, error) {
	m := miniredis.NewMiniRedis()
	if err := m.Start(); err != nil {
		return nil, err
	}
	m.SetTime(time.Now())
	m.ClockTTL(true)
	e := &Embedded{Mini: m, done: make(chan struct{}), ticked: make(chan struct{})}
	go func() {
		defer close(e.ticked)
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-e.done:
				return
			case now := <-t.C:
				m.SetTime(now)
			}
		}
	}()
	e.Client = redis.NewClient(&redis.Options{Addr: m.Addr()})
	return e, nil
}

// Close closes the client and stops the server.
func (e *Embedded) Close() {
	_ = e.Client.Close()
	close(e.done)
	<-e.ticked
	e.Mini.Close()
}
