// Package cliconn connects the command-line tool (cmd/coordctl) to a
// server: its flags (--redis URL, --cluster ADDRS, --sentinel
// MASTER@ADDRS), its environment variable ([EnvURL]), their checks, and
// errors that never carry a password.
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
	"regexp"
	"strconv"
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

	ExampleClusterCreds  = "rediss://user:PASSWORD@" + ExampleCluster
	ExampleSentinelCreds = "rediss://user:PASSWORD@" + ExampleSentinel
)

// PingTimeout bounds the first PING of Connect.
const PingTimeout = 3 * time.Second

// Flags are the connection flags. The zero value means "not given".
type Flags struct {
	URL      string // --redis
	Cluster  string // --cluster: [redis[s]://[user:pass@]]host:port,host:port
	Sentinel string // --sentinel: [redis[s]://[user:pass]@]master@host:port,host:port (see splitSentinel)
}

// Register adds --redis, --cluster and --sentinel to fs. The environment
// is read by Resolve, not shown as a default: a URL may carry a password,
// and -h must not print it.
func (f *Flags) Register(fs *flag.FlagSet) {
	fs.StringVar(&f.URL, "redis", "", "server URL, e.g. redis://user:PASSWORD@127.0.0.1:6379/0 or rediss://... for TLS (default $"+EnvURL+")")
	fs.StringVar(&f.Cluster, "cluster", "", "Redis Cluster seed nodes instead of --redis, e.g. 127.0.0.1:7000,127.0.0.1:7001 (prefix rediss://user:PASSWORD@ for TLS and ACL)")
	fs.StringVar(&f.Sentinel, "sentinel", "", "Sentinel master name and sentinels instead of --redis, e.g. mymaster@127.0.0.1:26379 (prefix rediss://user:PASSWORD@ for the data nodes, rediss://@ for TLS alone; a master name has no ':')")
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

// UsageError is a wrong flag or URL: exit status 2.
type UsageError struct{ Msg string }

// Error returns the error's message.
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

// Error returns the error's message.
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
		addrs, err := splitAddrs("--cluster", rest, ExampleCluster, ExampleClusterCreds)
		if err != nil {
			return nil, "", err
		}
		o := &redis.UniversalOptions{Addrs: addrs, Username: user, Password: pass, IsClusterMode: true}
		if scheme == "rediss" {
			o.TLSConfig = tlsFor(addrs[0])
		}
		return o, fmt.Sprintf("Redis Cluster (%d seed nodes)", len(addrs)), nil
	case f.Sentinel != "":
		scheme, user, pass, master, list, err := splitSentinel(f.Sentinel)
		if err != nil {
			return nil, "", err
		}
		addrs, err := splitAddrs("--sentinel", list, ExampleSentinel, ExampleSentinelCreds)
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
// net/url's errors quote the whole URL, password included. The userinfo
// is everything between "scheme://" and the last '@' (so a password may
// hold an unencoded '?', '/' or '#'); it is never echoed, nor is a query
// item whose name is not a go-redis option, nor a value without a scheme.
func parseURL(raw string) (*redis.Options, error) {
	const want = "want redis://[user:PASSWORD@]host:port/db, rediss://... (TLS) or unix:///path/to/socket"
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return nil, usagef("--redis: no scheme (the value is not shown: it may be a password); %s, e.g. --redis redis://127.0.0.1:6379/0", want)
	}
	switch scheme {
	case "redis", "rediss", "unix":
	default:
		return nil, usagef("--redis: %s is not supported; %s, e.g. --redis %s", showScheme(scheme), want, ExampleURL)
	}
	shown := RedactURL(raw)
	info, tail, hasInfo := splitUserinfo(rest)
	var user *url.Userinfo
	if hasInfo {
		var err error
		if user, err = parseUserinfo(info); err != nil {
			return nil, usagef("--redis %s: a bad percent-escape in the user:password part; %s", shown, want)
		}
	}
	u, err := url.Parse(scheme + "://" + tail)
	if err != nil {
		return nil, usagef("--redis %s: %s; %s, e.g. --redis %s", shown, urlProblem(err), want, ExampleURL)
	}
	u.User = user
	if scheme != "unix" {
		if p := u.Port(); p != "" && !validPort(p) {
			return nil, usagef("--redis %s: the port must be a number from 1 to 65535; %s, e.g. --redis %s", shown, want, ExampleURL)
		}
	}
	if bad := unexpectedOptions(u.RawQuery, scheme == "rediss"); bad != "" {
		return nil, usagef("--redis %s: unexpected option: %s; %s", shown, bad, want)
	}
	opt, err := redis.ParseURL(u.String())
	if err != nil {
		// go-redis' messages quote option values and paths: say which
		// part is wrong in words of our own.
		return nil, usagef("--redis %s: %s; %s", shown, goRedisProblem(err), want)
	}
	return opt, nil
}

// showScheme names a scheme that is not supported: quoted when it looks
// like one, else not shown.
func showScheme(s string) string {
	if schemeLike.MatchString(s) {
		return fmt.Sprintf("scheme %q", s)
	}
	return "the scheme (not shown)"
}

var schemeLike = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]{0,15}$`)

// splitUserinfo splits the text after "scheme://" at its last '@'.
func splitUserinfo(rest string) (info, tail string, has bool) {
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return "", rest, false
	}
	return rest[:at], rest[at+1:], true
}

// parseUserinfo reads "user[:password]", each part percent-decoded.
func parseUserinfo(info string) (*url.Userinfo, error) {
	name, pass, hasPass := strings.Cut(info, ":")
	n, err := url.PathUnescape(name)
	if err != nil {
		return nil, err
	}
	if !hasPass {
		return url.User(n), nil
	}
	p, err := url.PathUnescape(pass)
	if err != nil {
		return nil, err
	}
	return url.UserPassword(n, p), nil
}

// validPort reports whether p is a port number, 1 to 65535.
func validPort(p string) bool {
	n, err := strconv.Atoi(p)
	return err == nil && n >= 1 && n <= 65535 && strings.Trim(p, "0123456789") == ""
}

// goRedisOptions are the query parameters go-redis' ParseURL reads
// (v9.23); skip_verify only on rediss://.
var goRedisOptions = map[string]bool{
	"db": true, "protocol": true, "client_name": true, "max_retries": true,
	"min_retry_backoff": true, "max_retry_backoff": true, "dial_timeout": true,
	"read_timeout": true, "write_timeout": true, "pool_fifo": true, "pool_size": true,
	"pool_timeout": true, "min_idle_conns": true, "max_idle_conns": true,
	"max_active_conns": true, "max_concurrent_dials": true, "pipeline_pool_size": true,
	"pipeline_read_buffer_size": true, "pipeline_write_buffer_size": true,
	"conn_max_idle_time": true, "idle_timeout": true, "conn_max_lifetime": true,
	"max_conn_age": true, "conn_max_lifetime_jitter": true, "skip_verify": true,
}

// knownNames are query parameter names that are not go-redis options but
// are shown by name (never by value) in messages: a user may try them.
var knownNames = map[string]bool{
	"password": true, "username": true, "user": true, "pass": true,
	"sentinel_password": true, "sentinel_username": true, "auth": true,
}

// optionValue matches the option values shown in messages: numbers,
// durations and booleans.
var optionValue = regexp.MustCompile(`^(-?[0-9][0-9a-z.]{0,15}|true|false)$`)

// unexpectedOptions describes the query items go-redis would refuse:
// the names it knows (knownNames), and how many others (not shown).
func unexpectedOptions(query string, tls bool) string {
	var names []string
	hidden := 0
	for kv := range strings.SplitSeq(query, "&") {
		if kv == "" {
			continue
		}
		k, _, _ := strings.Cut(kv, "=")
		if k, err := url.QueryUnescape(k); err == nil && goRedisOptions[k] && (k != "skip_verify" || tls) {
			continue
		}
		if knownNames[k] {
			names = append(names, k)
		} else {
			hidden++
		}
	}
	switch hidden {
	case 0:
	case 1:
		names = append(names, "1 item that is not a go-redis option (not shown)")
	default:
		names = append(names, fmt.Sprintf("%d items that are not go-redis options (not shown)", hidden))
	}
	return strings.Join(names, ", ")
}

var badOptionValue = regexp.MustCompile(`invalid ([a-z_]+) (number|duration|boolean)`)

// goRedisProblem describes a go-redis ParseURL error without its values.
func goRedisProblem(err error) string {
	msg := err.Error()
	if m := badOptionValue.FindStringSubmatch(msg); m != nil {
		if m[1] == "database" {
			return "the database is not a number"
		}
		return fmt.Sprintf("the value of ?%s is not a %s", m[1], m[2])
	}
	switch {
	case strings.Contains(msg, "invalid URL path"):
		return "the path is not /DATABASE"
	case strings.Contains(msg, "empty unix socket path"):
		return "no socket path"
	}
	return "not a valid URL"
}

// urlProblem describes a net/url parse error without quoting the URL.
func urlProblem(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		msg := ue.Err.Error()
		if strings.Contains(msg, "invalid port") {
			return "the port is not a number"
		}
		if strings.Contains(msg, "invalid character") || strings.Contains(msg, "invalid userinfo") {
			return "a character in the address is not allowed"
		}
		if strings.Contains(msg, "escape") {
			return "a bad percent-escape"
		}
	}
	return "not a valid URL"
}

// splitCreds splits an optional "redis[s]://[user:pass@]" prefix off a
// --cluster value. The user:password part is recognised only after a
// scheme; without one, a value that looks like it carries one is refused
// (its items are checked by splitAddrs, whose messages mask it).
func splitCreds(flagName, v string) (scheme, user, pass, rest string, err error) {
	scheme, rest, ok := strings.Cut(v, "://")
	if !ok {
		scheme, rest = "redis", v
	} else if scheme != "redis" && scheme != "rediss" {
		return "", "", "", "", usagef("%s: %s is not supported; want redis:// or rediss:// before the addresses, e.g. %s %s", flagName, showScheme(scheme), flagName, exampleCreds(flagName))
	}
	info, after, has := credsPart(flagName, rest)
	if !has {
		return scheme, "", "", rest, nil
	}
	if !ok {
		return "", "", "", "", usagef("%s: a user:PASSWORD@ part needs redis:// or rediss:// before it, e.g. %s %s", flagName, flagName, exampleCreds(flagName))
	}
	ui, perr := parseUserinfo(info)
	if perr != nil {
		return "", "", "", "", usagef("%s: the user:password part (not shown) has a bad percent-escape (percent-encode special characters, e.g. @ as %%40)", flagName)
	}
	pass, _ = ui.Password()
	return scheme, ui.Username(), pass, after, nil
}

// splitSentinel parses a --sentinel value:
//
//	[redis[s]://[user[:PASSWORD]]@]MASTER@host:port[,host:port...]
//
// Without a scheme the text before the '@' is the master name, and a
// master name never contains ':' (nor '/', '?', '#', ',' or a space):
// "u:pw@host:port" is refused as a user:PASSWORD@ part without a master.
// After a scheme, as in any URL, the text before the first '@' is the
// user:PASSWORD part, so the master needs a second '@':
// rediss://user:PASSWORD@mymaster@host:port, or rediss://@mymaster@host:port
// without credentials; "redis://x@host:port" is refused (x may be a
// password). No message shows what may be a password.
func splitSentinel(v string) (scheme, user, pass, master, list string, err error) {
	const flagName = "--sentinel"
	want := "want [redis[s]://[user:PASSWORD@]]MASTER@host:port,... (a master name has no ':'), e.g. --sentinel " + ExampleSentinel + " or --sentinel " + ExampleSentinelCreds
	scheme, rest, hasScheme := strings.Cut(v, "://")
	if !hasScheme {
		scheme, rest = "redis", v
	} else if scheme != "redis" && scheme != "rediss" {
		return "", "", "", "", "", usagef("%s: %s is not supported; want redis:// or rediss:// before the master name, e.g. %s %s", flagName, showScheme(scheme), flagName, ExampleSentinelCreds)
	}
	if !hasScheme {
		first, _, _ := strings.Cut(rest, ",")
		switch strings.Count(first, "@") {
		case 0:
			return "", "", "", "", "", usagef("%s: want MASTER@host:port,..., e.g. --sentinel %s", flagName, ExampleSentinel)
		case 1:
		default:
			return "", "", "", "", "", usagef("%s: a user:PASSWORD@ part needs redis:// or rediss:// before it, e.g. %s %s", flagName, flagName, ExampleSentinelCreds)
		}
		master, list, _ = strings.Cut(rest, "@")
		if strings.Contains(master, ":") {
			return "", "", "", "", "", usagef("%s: the text before '@' (not shown) has a ':', so it is no master name but looks like user:PASSWORD@ without a master; %s", flagName, want)
		}
	} else {
		var info, after string
		var ok bool
		if info, after, ok = strings.Cut(rest, "@"); !ok {
			return "", "", "", "", "", usagef("%s: no MASTER@ after %s://; %s", flagName, scheme, want)
		}
		if master, list, ok = strings.Cut(after, "@"); !ok {
			return "", "", "", "", "", usagef("%s: after %s:// the text before the first '@' is the user:PASSWORD part (not shown) and no MASTER@ follows it; write %s://user:PASSWORD@MASTER@host:port, %s://@MASTER@host:port without credentials, or MASTER@host:port without a scheme", flagName, scheme, scheme, scheme)
		}
		if strings.Contains(list, "@") && !strings.Contains(list[:strings.Index(list, "@")], ",") {
			return "", "", "", "", "", usagef("%s: more than two '@' before the first address (not shown): percent-encode an '@' in the password as %%40; %s", flagName, want)
		}
		ui, perr := parseUserinfo(info)
		if perr != nil {
			return "", "", "", "", "", usagef("%s: the user:password part (not shown) has a bad percent-escape (percent-encode special characters, e.g. @ as %%40)", flagName)
		}
		user = ui.Username()
		pass, _ = ui.Password()
		if !masterName.MatchString(master) {
			return "", "", "", "", "", usagef("%s: the master name (not shown) is empty or has a ':', '/', '?', '#', ',' or space (or an '@' of the password is not percent-encoded as %%40); %s", flagName, want)
		}
	}
	if !masterName.MatchString(master) {
		return "", "", "", "", "", usagef("%s: the master name %q is empty or has a '/', '?', '#', ',' or space; %s", flagName, master, want)
	}
	return scheme, user, pass, master, list, nil
}

// masterName matches a Sentinel master name as --sentinel reads it.
var masterName = regexp.MustCompile(`^[^:/?#,@\s]+$`)

func exampleCreds(flagName string) string {
	if flagName == "--sentinel" {
		return ExampleSentinelCreds
	}
	return ExampleClusterCreds
}

// credsPart finds the user:password part at the start of a --cluster
// value (after its scheme): up to its first '@', unless a ',' comes
// before it. has is false when there is none.
func credsPart(flagName, rest string) (info, after string, has bool) {
	_ = flagName
	at := strings.Index(rest, "@")
	if at < 0 {
		return "", rest, false
	}
	if strings.Contains(rest[:at], ",") {
		// host:port,user:pass@host:port: a user:pass in a later item
		// (splitAddrs refuses it).
		return "", rest, false
	}
	return rest[:at], rest[at+1:], true
}

// splitAddrs splits a comma-separated host:port list (each port 1 to
// 65535). An item carrying a user:password part is refused with the
// password masked; options (?...) are refused unseen.
func splitAddrs(flagName, list, example, exampleWithCreds string) ([]string, error) {
	if strings.Contains(list, "?") {
		return nil, usagef("%s: options after '?' (not shown) are not supported here; give host:port,... only (a password goes in the user:PASSWORD@ part), e.g. %s %s", flagName, flagName, exampleWithCreds)
	}
	var addrs []string
	for a := range strings.SplitSeq(list, ",") {
		a = strings.TrimSpace(a)
		if a == "" {
			continue
		}
		if strings.Contains(a, "@") {
			return nil, usagef("%s: the address %q carries a user:PASSWORD@ part: give it once, after redis:// or rediss:// before the first address, e.g. %s %s", flagName, redactItem(a), flagName, exampleWithCreds)
		}
		_, port, err := net.SplitHostPort(a)
		if err != nil || port == "" {
			return nil, usagef("%s: %q is not host:port, e.g. %s %s", flagName, a, flagName, example)
		}
		if !validPort(port) {
			return nil, usagef("%s: %q: the port must be a number from 1 to 65535, e.g. %s %s", flagName, a, flagName, example)
		}
		addrs = append(addrs, a)
	}
	if len(addrs) == 0 {
		return nil, usagef("%s: no address given, e.g. %s %s", flagName, flagName, example)
	}
	return addrs, nil
}

// redactItem masks the password of a "user:pass@host:port" item (all of
// the part before the last '@' when it has no ':').
func redactItem(a string) string {
	at := strings.LastIndex(a, "@")
	if at < 0 {
		return a
	}
	user, _, ok := strings.Cut(a[:at], ":")
	if !ok {
		return "xxxxx" + a[at:]
	}
	return user + ":xxxxx" + a[at:]
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
		if isBadDB(err) {
			return nil, usagef("--redis %s: the server has no database %d (%s); its databases are 0 to N-1 (CONFIG GET databases), e.g. --redis %s", RedactURL(f.URL), o.DB, "DB index is out of range", ExampleURL)
		}
		return nil, &ConnError{Msg: err.Error(), Err: err}
	}
	return &Client{UniversalClient: c, Desc: desc}, nil
}

// isBadDB reports whether err is the server's refusal of the URL's
// database number (SELECT n beyond its databases): a wrong URL, not a
// connection failure.
func isBadDB(err error) bool {
	var ce *ConnError
	if errors.As(err, &ce) && ce.Err != nil {
		err = ce.Err
	}
	msg := err.Error()
	return strings.Contains(msg, "DB index is out of range") || strings.Contains(msg, "invalid DB index")
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
// connection error (IsConnError), 1 otherwise. coordctl exits with it.
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
	_ = hadPassword
	wrap := func(format string, a ...any) error { return &describedError{msg: fmt.Sprintf(format, a...), err: err} }
	switch Refusal(err) {
	case "NOAUTH":
		return wrap("the server wants a password (NOAUTH): give it in the URL, e.g. --redis %s (percent-encode special characters, e.g. @ as %%40), or in $%s", ExampleURL, EnvURL)
	case "WRONGPASS":
		if strings.Contains(err.Error(), "without any password configured") {
			return wrap("the URL gives a password but the server has none configured (WRONGPASS): remove user:PASSWORD@ from the URL")
		}
		return wrap("the server refused the user name or password (WRONGPASS): check the user:PASSWORD part of the URL, e.g. --redis %s", ExampleURL)
	case "NOPERM":
		return wrap("the server's ACL denies this user a command coordctl needs (NOPERM): %v", err)
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
		return wrap("cannot reach the server: no answer within %v (is the address right? does it need rediss:// for TLS?)", PingTimeout)
	}
	return wrap("cannot reach the server: %v", err)
}

// describedError is a connection error said in words of our own; Unwrap
// returns the client's error (for Refusal and errors.Is).
type describedError struct {
	msg string
	err error
}

// Error returns the error's message.
func (e *describedError) Error() string { return e.msg }

// Unwrap returns the client's error.
func (e *describedError) Unwrap() error { return e.err }

// Refusal names the server's refusal of the connection's user that err
// carries: "NOAUTH" (the server wants a password and none was given),
// "WRONGPASS" (the user name or password is wrong, or a password was given
// to a server that has none), "NOPERM" (the ACL denies the user a command
// or a key), or "" for any other error. It reads the error code of the
// first server error reply in err's chain (the reply's first word), never
// the text around it.
func Refusal(err error) string {
	var re redis.Error
	if err == nil || !errors.As(err, &re) {
		return ""
	}
	msg := re.Error()
	code, _, _ := strings.Cut(msg, " ")
	switch code {
	case "NOAUTH", "WRONGPASS", "NOPERM":
		return code
	case "ERR":
		// Servers older than ACLs, and a password given to a server that
		// has none, say it with ERR.
		if strings.HasPrefix(msg, "ERR invalid password") || strings.Contains(msg, "without any password configured") {
			return "WRONGPASS"
		}
	}
	return ""
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

// RedactArg is a command-line argument as a message may echo it: a
// URL-like value (one with "://") as RedactURL shows it, an item with an
// '@' ("user:PASSWORD@host:port") with the part before its last '@'
// masked as redactItem does, any other value unchanged. Only the
// credential part is masked: the rest is shown as given.
func RedactArg(a string) string {
	switch {
	case strings.Contains(a, "://"):
		return RedactURL(a)
	case strings.Contains(a, "@"):
		return redactItem(a)
	}
	return a
}

// RedactURL returns a URL-like value as messages show it: the userinfo
// (everything between "scheme://" and the last '@') as "user:xxxxx" when
// its user name is plain, else as "xxxxx"; of the query, the names of
// go-redis options and of well-known parameters (password=, ...) with
// their values (a setting's plain value shown, any other "xxxxx"), and
// every other item as "xxxxx". A value without "://" is not shown at all.
func RedactURL(v string) string {
	scheme, rest, ok := strings.Cut(v, "://")
	if !ok {
		return "xxxxx"
	}
	if !schemeLike.MatchString(scheme) {
		scheme = "xxxxx"
	}
	out := scheme + "://"
	info, tail, has := splitUserinfo(rest)
	if has {
		out += maskUserinfo(info) + "@"
	}
	head, query, hasQuery := strings.Cut(tail, "?")
	out += head
	if !hasQuery {
		return out
	}
	parts := strings.Split(query, "&")
	for i, kv := range parts {
		k, val, hasVal := strings.Cut(kv, "=")
		switch {
		case !goRedisOptions[k] && !knownNames[k]:
			parts[i] = "xxxxx"
		case !hasVal:
			parts[i] = k
		case goRedisOptions[k] && optionValue.MatchString(val):
			parts[i] = k + "=" + val
		default:
			parts[i] = k + "=xxxxx"
		}
	}
	return out + "?" + strings.Join(parts, "&")
}

// plainUser matches a user name shown in messages.
var plainUser = regexp.MustCompile(`^[A-Za-z0-9._~-]*$`)

// maskUserinfo shows a userinfo's user name (when it is plain and a ':'
// follows it) and never its password.
func maskUserinfo(info string) string {
	if user, _, ok := strings.Cut(info, ":"); ok && plainUser.MatchString(user) {
		return user + ":xxxxx"
	}
	return "xxxxx"
}

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
	e.Client = redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true})
	return e, nil
}

// Close closes the client and stops the server.
func (e *Embedded) Close() {
	_ = e.Client.Close()
	close(e.done)
	<-e.ticked
	e.Mini.Close()
}
