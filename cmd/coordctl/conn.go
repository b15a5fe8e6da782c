package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/check"
	"github.com/coordkit/coordination/internal/cliconn"
)

// Exit statuses, the same for every command (see the usage text and
// README's coordctl section).
const (
	exitOK      = 0  // done; the lock/permit/latch/... was there
	exitRefused = 1  // refused, not acquired, limited, denied, not found, or another failure
	exitUsage   = 2  // bad flags, arguments or URL; unknown command or scenario
	exitConn    = 3  // the server cannot be reached (or the connection was lost)
	exitAuth    = 4  // the server refused the user: NOAUTH (no password given) or WRONGPASS (wrong user or password)
	exitPerm    = 5  // the server's ACL denied the user a command or key: NOPERM
	exitLost    = 75 // the lock, permit or leadership was lost while the command ran (EX_TEMPFAIL)
)

// exitTable is the exit-status table printed by coordctl --help.
const exitTable = `Exit status (every command):
  0   ok
  1   refused: not acquired, limited, denied, not found (no such key), a key of another
      kind or of other settings, a corrupt layout, or another failure
  2   usage: a bad flag, argument or URL (a database the server lacks, a duration
      that is not positive), no command, an unknown command or demo scenario
  3   connection: the server cannot be reached, or the connection was lost
  4   authentication: the server wants a password (NOAUTH), or refused the user
      name or password (WRONGPASS)
  5   permission: the server's ACL denies the user a command or key (NOPERM)
  75  lost: the lock, permit or leadership was lost while the command ran
  130 interrupted (SIGINT or SIGTERM) while waiting, or during a demo (its keys removed)
  run commands (lock run, semaphore run, leader run) otherwise exit with the command's
  own status (128+N when it was killed by signal N; 127/126 when it cannot be started)`

// connFlags are the connection flags shared by every subcommand.
type connFlags struct {
	cliconn.Flags
	prefix string
}

func (c *connFlags) register(fs *flag.FlagSet) {
	c.Flags.Register(fs)
	fs.StringVar(&c.prefix, "prefix", "", "key prefix prepended to every key, as the application's coordination.WithKeyPrefix")
}

// connect returns a client for the flags (see cliconn.Flags.Open). The
// error is a *cliconn.UsageError or *cliconn.ConnError (see exitFor).
func (c *connFlags) connect(embedded bool) (client redis.UniversalClient, desc string, stop func(), err error) {
	cl, stop, err := c.Open(context.Background(), embedded)
	if err != nil {
		return nil, "", nil, err
	}
	return cl.UniversalClient, cl.Desc, stop, nil
}

// coordinator connects to the server the flags name (no embedded server)
// and returns a coordinator with the --prefix; stop closes the client.
func (c *connFlags) coordinator() (coord *coordination.Coordinator, client redis.UniversalClient, desc string, stop func(), err error) {
	client, desc, stop, err = c.connect(false)
	if err != nil {
		return nil, nil, "", nil, err
	}
	coord, err = coordination.New(client, coordination.WithKeyPrefix(c.prefix))
	if err != nil {
		stop()
		return nil, nil, "", nil, err
	}
	return coord, client, desc, stop, nil
}

// exitFor maps an error to an exit status: 2 for usage errors (a bad flag
// or URL, an invalid argument), 4 when the server refused the user (NOAUTH,
// WRONGPASS), 5 when its ACL denied a command or key (NOPERM), 3 when the
// server cannot be reached or the connection was lost, 1 otherwise. The
// refusals are told by the reply's error code (cliconn.Refusal).
func exitFor(err error) int {
	if errors.Is(err, coordination.ErrInvalidArgument) {
		return exitUsage
	}
	switch cliconn.Refusal(err) {
	case "NOPERM":
		return exitPerm
	case "NOAUTH", "WRONGPASS":
		return exitAuth
	}
	return cliconn.ExitCode(err)
}

// fail prints "coordctl NAME: err" (naming a refusal of the user met after
// connecting, or a lost connection) and returns exitFor(err).
func fail(stderr io.Writer, name string, err error) int {
	code := exitFor(err)
	var ce *cliconn.ConnError
	switch {
	case errors.As(err, &ce):
		// Connect's errors say what happened and what to do.
	case code == exitPerm:
		fmt.Fprintf(stderr, "coordctl %s: the server's ACL denies this user a command or key coordctl needs (NOPERM; the library's least-privilege ACL line lists what to grant): %v\n", name, err)
		return code
	case code == exitAuth:
		fmt.Fprintf(stderr, "coordctl %s: the server refused the user (%s): %v\n", name, cliconn.Refusal(err), err)
		return code
	case code == exitConn:
		fmt.Fprintf(stderr, "coordctl %s: lost the connection to the server: %v\n", name, err)
		return code
	}
	fmt.Fprintf(stderr, "coordctl %s: %v\n", name, err)
	return code
}

// cmdFlags is a subcommand's flag set, with the connection flags
// registered and one-line flag errors.
type cmdFlags struct {
	*flag.FlagSet
	name string
	help func() // prints the usage, an example, the flags and the exit statuses on stdout
	cf   *connFlags
	// pos are the positional arguments. Flags may follow them (coordctl
	// inspect KEY --json), except in the run commands, where the first
	// argument that is not a flag starts the command.
	pos    []string
	stdout io.Writer
	stderr io.Writer
	// zeroOK names the duration flags for which an explicit 0 means
	// something (--timeout 0: wait forever); every other duration given
	// on the command line must be positive.
	zeroOK map[string]bool
}

// allowZero lets duration flag name be given as 0 (its documented
// meaning); a negative value is still refused.
func (c *cmdFlags) allowZero(name string) {
	if c.zeroOK == nil {
		c.zeroOK = map[string]bool{}
	}
	c.zeroOK[name] = true
}

// checkDurations refuses a duration flag given on the command line as a
// negative value, or as 0 where 0 has no meaning: the library would
// refuse it (latch.WithDeadline), or coordctl would quietly treat it as
// "not given".
func (c *cmdFlags) checkDurations() error {
	var err error
	c.Visit(func(f *flag.Flag) {
		g, ok := f.Value.(flag.Getter)
		if !ok || err != nil {
			return
		}
		d, ok := g.Get().(time.Duration)
		if !ok || d > 0 || (d == 0 && c.zeroOK[f.Name]) {
			return
		}
		what := "must be positive"
		if c.zeroOK[f.Name] {
			what = "must not be negative"
		}
		err = fmt.Errorf("--%s %s, got %v; e.g. --%s %s", f.Name, what, d, f.Name, c.exampleValue(f.Name))
	})
	return err
}

// newFlags returns the flag set of subcommand name. usage is the synopsis
// and description; example is one or more example command lines (shown
// by --help, required for every command).
func newFlags(name string, stdout, stderr io.Writer, usage, example string) *cmdFlags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are printed by parse, in one line
	c := &cmdFlags{FlagSet: fs, name: name, cf: &connFlags{}, stdout: stdout, stderr: stderr}
	// The flag package calls Usage on every parse error too: parse prints
	// it for -h only.
	fs.Usage = func() {}
	c.help = func() {
		fmt.Fprintf(stdout, "%s\n\nExample:\n%s\n\nFlags:\n", usage, indent(example))
		fs.VisitAll(func(f *flag.Flag) {
			kind, text := flag.UnquoteUsage(f)
			line := "  --" + f.Name
			if kind != "" {
				line += " " + kind
			}
			if f.DefValue != "" && f.DefValue != "0" && f.DefValue != "0s" && f.DefValue != "false" {
				text += " (default " + f.DefValue + ")"
			}
			fmt.Fprintf(stdout, "%s\n      %s\n", line, text)
		})
		fmt.Fprintf(stdout, "\n%s\n", exitTable)
	}
	c.cf.register(fs)
	return c
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(strings.TrimSpace(s), "\n", "\n  ")
}

// parse parses args. On -h/--help it prints the usage on stdout and
// returns (0, false); on a bad flag it prints one line naming the flag
// and an example value and returns (2, false).
func (c *cmdFlags) parse(args []string) (int, bool) {
	err := c.parseInterspersed(args)
	if err == nil {
		err = c.checkDurations()
		if err == nil {
			return 0, true
		}
		c.usagef("%v", err)
		return exitUsage, false
	}
	if errors.Is(err, flag.ErrHelp) {
		c.help()
		return exitOK, false
	}
	c.usagef("%s", c.flagProblem(err))
	return exitUsage, false
}

func (c *cmdFlags) parseInterspersed(args []string) error {
	runs := strings.HasSuffix(c.name, " run")
	for {
		if err := c.Parse(args); err != nil {
			return err
		}
		rest := c.FlagSet.Args()
		used := len(args) - len(rest)
		if len(rest) == 0 || runs || (used > 0 && args[used-1] == "--") {
			c.pos = append(c.pos, rest...)
			return nil
		}
		c.pos = append(c.pos, rest[0])
		args = rest[1:]
	}
}

// Args returns the positional arguments.
func (c *cmdFlags) Args() []string { return c.pos }

// NArg returns the number of positional arguments.
func (c *cmdFlags) NArg() int { return len(c.pos) }

// Arg returns positional argument i, or "".
func (c *cmdFlags) Arg(i int) string {
	if i < 0 || i >= len(c.pos) {
		return ""
	}
	return c.pos[i]
}

// usagef prints a one-line usage error and a pointer to --help.
func (c *cmdFlags) usagef(format string, a ...any) int {
	fmt.Fprintf(c.stderr, "coordctl %s: %s (see coordctl %s --help)\n", c.name, fmt.Sprintf(format, a...), c.name)
	return exitUsage
}

// flagProblem turns a flag package error into a sentence naming the flag
// and an example value.
func (c *cmdFlags) flagProblem(err error) string {
	msg := err.Error()
	switch {
	case strings.HasPrefix(msg, "flag provided but not defined: "):
		return "unknown flag " + dashes(strings.TrimPrefix(msg, "flag provided but not defined: "))
	case strings.HasPrefix(msg, "flag needs an argument: "):
		name := strings.TrimLeft(strings.TrimPrefix(msg, "flag needs an argument: "), "-")
		return fmt.Sprintf("--%s needs a value, e.g. --%s %s", name, name, c.exampleValue(name))
	case strings.HasPrefix(msg, "invalid value "):
		// invalid value "30" for flag -ttl: parse error
		var val, name string
		rest := strings.TrimPrefix(msg, "invalid value ")
		if i := strings.Index(rest, " for flag -"); i >= 0 {
			val = rest[:i]
			name = rest[i+len(" for flag -"):]
			if j := strings.Index(name, ":"); j >= 0 {
				name = name[:j]
			}
		}
		if u, err := strconv.Unquote(val); err == nil {
			val = u
		}
		return fmt.Sprintf("--%s %s is not %s, e.g. --%s %s", name, val, c.kindOf(name), name, c.exampleValue(name))
	}
	return msg
}

func dashes(f string) string { return "--" + strings.TrimLeft(f, "-") }

// kindOf names what a flag's value must be.
func (c *cmdFlags) kindOf(name string) string {
	f := c.Lookup(name)
	if f == nil {
		return "valid"
	}
	if g, ok := f.Value.(flag.Getter); ok {
		switch g.Get().(type) {
		case time.Duration:
			return "a duration with a unit"
		case int, int64, uint, uint64:
			return "a whole number"
		case float64:
			return "a number"
		case bool:
			return "true or false"
		}
	}
	return "valid"
}

// exampleValue returns an example value for a flag: its default when that
// is not a zero value, else one of its kind.
func (c *cmdFlags) exampleValue(name string) string {
	f := c.Lookup(name)
	if f == nil {
		return "VALUE"
	}
	if g, ok := f.Value.(flag.Getter); ok {
		switch v := g.Get().(type) {
		case time.Duration:
			if v > 0 {
				return v.String()
			}
			return "30s"
		case int, int64:
			// A default that is not a valid value (--count -1: "required")
			// is never suggested.
			if n, err := strconv.ParseInt(f.DefValue, 10, 64); err == nil && n > 0 {
				return f.DefValue
			}
			return "3"
		case string:
			switch name {
			case "redis":
				return cliconn.ExampleURL
			case "cluster":
				return cliconn.ExampleCluster
			case "sentinel":
				return cliconn.ExampleSentinel
			}
			if ex, ok := stringExamples[name]; ok {
				return ex
			}
			if v != "" {
				return v
			}
		}
	}
	return "VALUE"
}

// stringExamples are example values of string flags without a default.
var stringExamples = map[string]string{
	"scan":      "'api:*'",
	"key":       "nightly",
	"prefix":    "myapp:",
	"algorithm": "token-bucket",
	"namespace": "tenant:42",
	"permit":    "3f2a9c1e",
	"id":        "worker-1",
}

// connectCoord checks the connection flags and connects (no embedded
// server), printing any error; on failure stop is nil and code is the
// exit status.
func (c *cmdFlags) connectCoord() (coord *coordination.Coordinator, client redis.UniversalClient, desc string, stop func(), code int) {
	coord, client, desc, stop, err := c.cf.coordinator()
	if err != nil {
		return nil, nil, "", nil, fail(c.stderr, c.name, err)
	}
	return coord, client, desc, stop, 0
}

// echoArgs is arguments as a message echoes them, each quoted, with the
// credential part of any URL-like one masked (cliconn.RedactArg).
func echoArgs(args []string) string {
	shown := make([]string, len(args))
	for i, a := range args {
		shown[i] = strconv.Quote(cliconn.RedactArg(a))
	}
	return "[" + strings.Join(shown, " ") + "]"
}

// checkKey checks --key against the library's bound on a key
// (check.MaxKeyBytes, not counting --prefix) as the command uses it: as
// is, or inside each of shapes ("{K}:lock"). It returns 0, or the usage
// exit status after one line naming the flag and its own bound.
func (c *cmdFlags) checkKey(key string, shapes ...string) int {
	extra := 0
	for _, s := range shapes {
		extra = max(extra, len(s)-len("K"))
	}
	limit := check.MaxKeyBytes - extra
	if len(key) <= limit {
		return 0
	}
	if len(shapes) == 0 {
		return c.usagef("--key is %d bytes long; at most %d are allowed", len(key), limit)
	}
	return c.usagef("--key is %d bytes long; at most %d are allowed (the keys %s are at most %d bytes each)", len(key), limit, strings.Join(shapes, " and "), check.MaxKeyBytes)
}

// checkIdentity checks an identity (--id, a deny list's ID) against the
// library's bound on it (check.MaxIdentityBytes); what names it in the
// message. It returns 0, or the usage exit status after one line.
func (c *cmdFlags) checkIdentity(what, id string) int {
	if len(id) > check.MaxIdentityBytes {
		return c.usagef("%s is %d bytes long; at most %d are allowed", what, len(id), check.MaxIdentityBytes)
	}
	return 0
}
