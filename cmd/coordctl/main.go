// Command coordctl runs, inspects and repairs the coordination primitives
// from the command line, and demonstrates them.
//
//	coordctl demo [NAME...] [--redis URL]               run the self-checking demo scenarios
//	coordctl lock run --key K [--ttl 30s] -- cmd args   run a command under a kept-alive fenced lock
//	coordctl semaphore run --key K --capacity N -- cmd  run a command holding a semaphore permit
//	coordctl leader run --key K [--id NAME] -- cmd args run a command only while elected leader
//	coordctl leader status --key K [--watch]            show who leads an election
//	coordctl latch create|countdown|wait --key K        operate a countdown latch
//	coordctl ratelimit try --key K --algorithm ...      take permits from a limiter
//	coordctl denylist add|remove|check --key K ID       edit or query a deny list
//	coordctl fence retire --key K [--lease L]           delete a fenced name's counter (tokens restart at 1)
//	coordctl version                                    print the module version
//
// Every command takes --redis URL (default $COORD_REDIS_URL; rediss:// for
// TLS, redis://user:PASSWORD@host:port/db for an ACL user), --cluster
// host:port,... or --sentinel master@host:port,..., and --prefix P.
// Without a server, demo runs on an embedded miniredis.
//
// Exit status, for every command: 0 ok; 1 refused (not acquired, limited,
// denied, not found, a key of another kind or settings, another failure);
// 2 usage (a bad flag, argument or URL, no command, an unknown command or
// scenario); 3 connection or
// authentication; 75 lost while running. The run commands otherwise exit
// with their command's status. No output carries a password.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/redis/go-redis/v9"

	"github.com/coordkit/coordination/internal/cliconn"
)

// command is one subcommand (or sub-subcommand, named "lock run").
type command struct {
	name  string
	usage string // one line for coordctl --help
	run   func(args []string, stdout, stderr io.Writer) int
}

var commands = map[string]command{}

func register(c command) { commands[c.name] = c }

// go-redis' own log lines (dial retries and the like) are discarded:
// coordctl reports connection errors itself, once.
func init() { redis.SetLogger(quietLogger{}) }

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run runs coordctl with args. No output carries a password, by
// structure: a URL or connection value is only ever printed through
// cliconn's masking (RedactURL and friends: the credential part and the
// query items that are not go-redis settings shown as "xxxxx"), and an
// argument echoed in a message goes through echoArg. Nothing else of the
// output is searched or altered.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		// No command is a usage error: the help goes to stderr.
		usage(stderr)
		return exitUsage
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout)
		return exitOK
	}
	if args[0] == "version" || args[0] == "--version" {
		return runVersion(args[1:], stdout, stderr)
	}
	// Longest match first: "lock run" before "lock".
	for n := min(2, len(args)); n >= 1; n-- {
		if c, ok := commands[strings.Join(args[:n], " ")]; ok {
			return c.run(args[n:], stdout, stderr)
		}
	}
	var subs []string
	for name := range commands {
		if strings.HasPrefix(name, args[0]+" ") {
			subs = append(subs, name)
		}
	}
	if len(subs) > 0 {
		sort.Strings(subs)
		if len(args) > 1 && (args[1] == "-h" || args[1] == "--help") {
			fmt.Fprintf(stdout, "coordctl %s: subcommands %s (each takes --help)\n", args[0], strings.Join(subs, ", "))
			return exitOK
		}
		fmt.Fprintf(stderr, "coordctl: %q needs a subcommand: %s\n", args[0], strings.Join(subs, ", "))
		return exitUsage
	}
	shown := make([]string, 0, 2)
	for _, a := range args[:min(2, len(args))] {
		shown = append(shown, cliconn.RedactArg(a)) // a misplaced --redis URL may carry a password
	}
	hint := ""
	if strings.HasPrefix(args[0], "-") {
		hint = "; flags go after the command, e.g. coordctl inspect KEY --redis URL"
	}
	fmt.Fprintf(stderr, "coordctl: unknown command %q (see coordctl --help%s)\n", strings.Join(shown, " "), hint)
	return exitUsage
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "coordctl: distributed coordination primitives on Redis, from the command line.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	// A usage is "synopsis  description": aligned in two columns.
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, n := range names {
		u := commands[n].usage
		if loc := usageGap.FindAllStringIndex(u, -1); len(loc) > 0 {
			last := loc[len(loc)-1]
			u = u[:last[0]] + "\t" + u[last[1]:]
		}
		fmt.Fprintf(tw, "  %s\n", u)
	}
	_ = tw.Flush()
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Connection (every command):")
	fmt.Fprintf(w, "  --redis URL         redis://[user:PASSWORD@]host:port/db, rediss://... for TLS, unix:///path (default $%s)\n", cliconn.EnvURL)
	fmt.Fprintln(w, "  --cluster ADDRS     Redis Cluster seed nodes host:port,... ([rediss://user:PASSWORD@] before them for TLS/ACL)")
	fmt.Fprintln(w, "  --sentinel M@ADDRS  Sentinel master name and sentinels, e.g. mymaster@127.0.0.1:26379")
	fmt.Fprintln(w, "  --prefix P          the key prefix the application uses (coordination.WithKeyPrefix)")
	fmt.Fprintln(w, "demo runs on an embedded miniredis when no server is given.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Example:")
	fmt.Fprintln(w, "  coordctl lock run --redis redis://127.0.0.1:6379/0 --key nightly --ttl 30s -- ./report.sh")
	fmt.Fprintln(w)
	fmt.Fprintln(w, exitTable)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run a command with --help for its flags and an example; coordctl version prints")
	fmt.Fprintln(w, "the module version.")
}

// usageGap is the gap between a usage's synopsis and its description.
var usageGap = regexp.MustCompile(` {2,}|\t`)

// quietLogger discards go-redis' own log lines (dial retries and the
// like): coordctl reports connection errors itself, once.
type quietLogger struct{}

// Printf implements go-redis' logger interface and discards the line.
func (quietLogger) Printf(context.Context, string, ...any) {}
