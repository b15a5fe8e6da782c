// Command coordctl demonstrates, inspects and uses the coordination
// primitives from the command line.
//
//	coordctl demo [--redis URL] [--only NAME,...]      run the self-checking demo scenarios
//	coordctl lock run --key K [--ttl 30s] -- cmd args   run a command under a kept-alive fenced lock
//	coordctl leader run --key K [--id NAME] -- cmd args run a command only while elected leader
//	coordctl leader status --key K [--watch]           show who leads an election
//
// Without --redis, demo runs on an embedded miniredis whose clock follows
// the wall clock. --redis takes a go-redis URL (redis://[user:pass@]host:port/db,
// rediss:// for TLS); COORD_REDIS_URL is the default for every subcommand.
// Exit status: 0 on success, 1 when a demo invariant fails or a command
// fails, 2 on bad usage; lock run exits with its command's status.
package main

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/redis/go-redis/v9"
)

// command is one subcommand (or sub-subcommand, named "lock run").
type command struct {
	name  string
	usage string
	run   func(args []string, stdout, stderr io.Writer) int
}

var commands = map[string]command{}

func register(c command) { commands[c.name] = c }

func main() {
	redis.SetLogger(quietLogger{})
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout)
		return 0
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
		fmt.Fprintf(stderr, "coordctl: %q needs a subcommand: %s\n", args[0], strings.Join(subs, ", "))
		return 2
	}
	fmt.Fprintf(stderr, "coordctl: unknown command %q\n\n", strings.Join(args[:min(2, len(args))], " "))
	usage(stderr)
	return 2
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
	for _, n := range names {
		fmt.Fprintf(w, "  %s\n", commands[n].usage)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Every command takes --redis URL (or $COORD_REDIS_URL: redis://[user:pass@]host:port/db),")
	fmt.Fprintln(w, "or --cluster host:port,... (or $COORD_CLUSTER_ADDRS) for a Redis Cluster, and --prefix P")
	fmt.Fprintln(w, "for a key prefix. demo runs on an embedded miniredis when no server is given.")
	fmt.Fprintln(w, "Run a command with -h for its flags.")
}
