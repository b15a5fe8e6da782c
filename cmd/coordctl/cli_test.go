package main

import (
	"context"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/coordkit/coordination/internal/cliconn"
	"github.com/coordkit/coordination/internal/testkit/testharness"
)

// minimalArgs are arguments that get each command past its own checks to
// the point where it connects.
var minimalArgs = map[string][]string{
	"demo":               nil,
	"lock run":           {"--key", "k", "--", "true"},
	"semaphore run":      {"--key", "k", "--capacity", "1", "--", "true"},
	"leader run":         {"--key", "k", "--", "true"},
	"leader status":      {"--key", "k"},
	"leader resign":      {"--key", "k"},
	"latch create":       {"--key", "k", "--count", "1"},
	"latch countdown":    {"--key", "k"},
	"latch wait":         {"--key", "k"},
	"ratelimit try":      {"--key", "k", "--limit", "1", "--algorithm", "gcra", "--period", "1s"},
	"denylist add":       {"--key", "k", "id"},
	"denylist remove":    {"--key", "k", "id"},
	"denylist check":     {"--key", "k", "id"},
	"inspect":            {"k"},
	"idempotency show":   {"--key", "k"},
	"idempotency forget": {"--key", "k"},
	"repair claim":       {"--key", "k"},
	"repair latch":       {"--key", "k", "--delete"},
	"repair semaphore":   {"--key", "k", "--list"},
	"repair lock":        {"--key", "k", "--owner", "abcdefgh"},
	"fence retire":       {"--key", "k"},
}

func commandNames() []string {
	var names []string
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Every command has --help (exit 0, on stdout) with an example and the
// exit-status table; every command is covered by minimalArgs.
func TestEveryCommandHelp(t *testing.T) {
	for _, name := range commandNames() {
		if _, ok := minimalArgs[name]; !ok {
			t.Errorf("command %q has no entry in minimalArgs: the connection and password tests would skip it", name)
		}
		for _, h := range []string{"--help", "-h"} {
			code, out, errOut := runCmd(t, append(strings.Fields(name), h)...)
			if code != exitOK || errOut != "" {
				t.Errorf("coordctl %s %s: exit %d, stderr %q", name, h, code, errOut)
			}
			for _, want := range []string{"usage: coordctl " + name, "Example:\n  coordctl " + name, "--redis", "--sentinel", "Exit status (every command)", "75  lost"} {
				if !strings.Contains(out, want) {
					t.Errorf("coordctl %s %s lacks %q:\n%s", name, h, want, out)
				}
			}
		}
		if name == "demo" {
			continue
		}
		// A sub-subcommand's group shows its subcommands.
		group := strings.Fields(name)[0]
		if code, out, _ := runCmd(t, group, "--help"); code != exitOK || !strings.Contains(out, name) {
			t.Errorf("coordctl %s --help: exit %d, output %q", group, code, out)
		}
	}
	code, out, _ := runCmd(t, "--help")
	if code != exitOK || !strings.Contains(out, "Exit status") || !strings.Contains(out, "COORD_REDIS_URL") {
		t.Fatalf("coordctl --help: %d\n%s", code, out)
	}
	t.Logf("coordctl --help:\n%s", out)
}

// Bad flags: one line naming the flag and an example value, exit 2.
func TestFlagErrorsAreOneLine(t *testing.T) {
	t.Setenv(cliconn.EnvURL, "")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"lock", "run", "--ttl", "30", "--key", "k", "--", "true"}, "--ttl 30 is not a duration with a unit, e.g. --ttl 30s"},
		{[]string{"semaphore", "run", "--capacity", "four"}, "--capacity four is not a whole number, e.g. --capacity 3"},
		{[]string{"lock", "run", "--bogus"}, "unknown flag --bogus"},
		{[]string{"leader", "status", "--key"}, "--key needs a value"},
		{[]string{"demo", "--redis"}, "--redis needs a value, e.g. --redis " + cliconn.ExampleURL},
		{[]string{"demo", "leaderr"}, `no scenario "leaderr"; the scenarios are`},
		{[]string{"demo", "--only", "nope"}, `no scenario "nope"`},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"latch"}, `"latch" needs a subcommand`},
		{[]string{"demo", "--redis", "http://x"}, `--redis: scheme "http" is not supported`},
		{[]string{"demo", "--redis", "bogus"}, "--redis: no scheme (the value is not shown: it may be a password); want redis://"},
		{[]string{"demo", "--redis", "redis://x/0", "--cluster", "y:1"}, "give one of --redis, --cluster and --sentinel"},
		{[]string{"demo", "--cluster", "nohostport"}, `--cluster: "nohostport" is not host:port`},
		{[]string{"demo", "--sentinel", "127.0.0.1:26379"}, "--sentinel: want MASTER@host:port"},
		{[]string{"leader", "status", "--key", "k"}, "no server: give --redis URL (e.g. --redis redis://user:PASSWORD@127.0.0.1:6379/0), --cluster or --sentinel, or set COORD_REDIS_URL"},
		{[]string{"inspect", "k", "--redis", "redis://h:1/0", "extra"}, "give one KEY"},
		{[]string{"denylist", "check", "--key", "d", "a", "--bogus"}, "unknown flag --bogus"},
		{[]string{"inspect", "--scan"}, "--scan needs a value, e.g. --scan 'api:*'"},
		// A duration given must be positive (never quietly "not given").
		{[]string{"latch", "create", "--key", "k", "--count", "1", "--deadline", "-1s"}, "--deadline must be positive, got -1s; e.g. --deadline 30s"},
		{[]string{"latch", "create", "--key", "k", "--count", "1", "--deadline", "0"}, "--deadline must be positive, got 0s"},
		{[]string{"ratelimit", "try", "--key", "k", "--algorithm", "fixed-window", "--limit", "1", "--window", "-1s"}, "--window must be positive, got -1s"},
		{[]string{"latch", "wait", "--key", "k", "--timeout", "-1s"}, "--timeout must not be negative, got -1s"},
		{[]string{"leader", "status", "--key", "k", "--watch", "--poll=0s"}, "--poll must be positive, got 0s"},
	} {
		code, out, errOut := runCmd(t, c.args...)
		if code != exitUsage || out != "" || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, c.want) {
			t.Errorf("coordctl %s: exit %d, stdout %q, stderr %q; want 2 and one line with %q", strings.Join(c.args, " "), code, out, errOut, c.want)
		}
	}
}

// The demo NAME arguments pick scenarios.
func TestDemoByName(t *testing.T) {
	code, out, errOut := runCmd(t, "demo", "leader")
	if code != exitOK || !strings.Contains(out, "== Leader election") || strings.Contains(out, "== Fencing") {
		t.Fatalf("coordctl demo leader: %d\n%s%s", code, out, errOut)
	}
}

// authServer is a server of its own that requires the password "right".
func authServer(t *testing.T) string {
	t.Helper()
	srv := testharness.StartStandalone(t, testharness.FirstFlavor(t))
	raw := redis.NewClient(srv.Options())
	defer raw.Close()
	if err := raw.ConfigSet(context.Background(), "requirepass", "right").Err(); err != nil {
		t.Fatal(err)
	}
	return srv.Addr
}

// No output of any command carries a password, whatever stage the
// connection fails at; and each stage has its exit status: 2 for a URL
// that is wrong, 3 for a server that cannot be reached or refuses the
// password. The authentication failures say how to give a password.
func TestNoPasswordInAnyOutput(t *testing.T) {
	const pw = "s3cr%40et" // percent-encoded: "s3cr@et" must not appear either
	addr := authServer(t)
	stages := []struct {
		name string
		flag []string
		env  string
		code int
		want string
	}{
		{"bad port", []string{"--redis", "redis://bob:" + pw + "@host:notaport/0"}, "", exitUsage, "the port is not a number"},
		{"bad scheme", []string{"--redis", "http://bob:" + pw + "@host/0"}, "", exitUsage, `scheme "http"`},
		{"no scheme", []string{"--redis", "bob:" + pw + "@host:6379"}, "", exitUsage, "no scheme"},
		{"bad escape", []string{"--redis", "redis://bob:s3cr%zzet@host/0"}, "", exitUsage, "--redis"},
		{"bad db", []string{"--redis", "redis://bob:" + pw + "@127.0.0.1:1/notadb"}, "", exitUsage, "database"},
		{"bad query", []string{"--redis", "redis://bob:" + pw + "@127.0.0.1:1/0?nope=1"}, "", exitUsage, "--redis"},
		{"unreachable", []string{"--redis", "redis://bob:" + pw + "@127.0.0.1:1/0"}, "", exitConn, "cannot reach the server"},
		{"env unreachable", nil, "redis://bob:" + pw + "@127.0.0.1:1/0", exitConn, "cannot reach the server"},
		{"env bad port", nil, "redis://bob:" + pw + "@host:notaport/0", exitUsage, "the port is not a number"},
		{"cluster unreachable", []string{"--cluster", "rediss://bob:" + pw + "@127.0.0.1:1,127.0.0.1:2"}, "", exitConn, "cannot reach"},
		{"cluster bad userinfo", []string{"--cluster", "redis://bob:s3cr%zzet@127.0.0.1:1"}, "", exitUsage, "--cluster"},
		{"sentinel unreachable", []string{"--sentinel", "redis://bob:" + pw + "@mymaster@127.0.0.1:1"}, "", exitConn, "cannot reach"},
		// Refusals of the user have a status of their own (4; issue 22:
		// they shared 3 with an unreachable server).
		{"no password", []string{"--redis", "redis://" + addr + "/0"}, "", exitAuth, "wants a password (NOAUTH): give it in the URL, e.g. --redis redis://user:PASSWORD@"},
		{"wrong password", []string{"--redis", "redis://default:" + pw + "@" + addr + "/0"}, "", exitAuth, "refused the user name or password (WRONGPASS)"},
		{"wrong password, env", nil, "redis://default:" + pw + "@" + addr + "/0", exitAuth, "WRONGPASS"},
		// Query strings: go-redis reads no password there, but a user may try.
		{"query password", []string{"--redis", "redis://:" + pw + "@127.0.0.1:1/0?password=zzetLeak"}, "", exitUsage, "?password=xxxxx: unexpected option: password"},
		{"query sentinel_password", []string{"--redis", "redis://127.0.0.1:1/0?db=0&sentinel_password=" + pw}, "", exitUsage, "?db=0&sentinel_password=xxxxx"},
		{"query unknown", []string{"--redis", "redis://127.0.0.1:1/0?pasword=zzet"}, "", exitUsage, "?xxxxx: unexpected option: 1 item that is not a go-redis option (not shown)"},
		{"query bare items", []string{"--redis", "redis://127.0.0.1:1/0?a=1&s3cret"}, "", exitUsage, "?xxxxx&xxxxx: unexpected option: 2 items"},
		{"query bad value", []string{"--redis", "redis://127.0.0.1:1/0?dial_timeout=s3cr"}, "", exitUsage, "?dial_timeout=xxxxx: the value of ?dial_timeout is not a duration"},
		// A '?' in the password: the userinfo runs to the last '@'.
		{"password with ?", []string{"--redis", "redis://:s3cr?zzet@127.0.0.1:nope/0"}, "", exitUsage, "--redis redis://:xxxxx@127.0.0.1:nope/0: the port is not a number"},
		{"unix password with ?", []string{"--redis", "unix://:s3cr?zzet@/tmp/x.sock?s3cret"}, "", exitUsage, "--redis unix://:xxxxx@/tmp/x.sock?xxxxx: unexpected option"},
		{"password as the URL", []string{"--redis", "s3cr" + "zzet"}, "", exitUsage, "--redis: no scheme (the value is not shown"},
		// Bad addresses are usage errors, found before dialing.
		{"port out of range", []string{"--redis", "redis://:" + pw + "@127.0.0.1:99999/0"}, "", exitUsage, "the port must be a number from 1 to 65535"},
		{"cluster bad port", []string{"--cluster", "redis://u:" + pw + "@127.0.0.1:notaport"}, "", exitUsage, `--cluster: "127.0.0.1:notaport": the port must be`},
		{"cluster query", []string{"--cluster", "redis://u:" + pw + "@127.0.0.1:1?password=zzet"}, "", exitUsage, "--cluster: options after '?' (not shown) are not supported"},
		{"sentinel bad port", []string{"--sentinel", "redis://u:" + pw + "@mymaster@127.0.0.1:notaport"}, "", exitUsage, `--sentinel: "127.0.0.1:notaport": the port must be`},
		{"sentinel query", []string{"--sentinel", "mymaster@127.0.0.1:1?sentinel_password=zzet"}, "", exitUsage, "--sentinel: options after '?' (not shown)"},
		// A --sentinel without a master name: never taken for one.
		{"sentinel userinfo, no master", []string{"--sentinel", "redis://u:" + pw + "@127.0.0.1:1"}, "", exitUsage, "no MASTER@ follows it"},
		{"sentinel user:pass, no scheme, no master", []string{"--sentinel", "u:" + pw + "@127.0.0.1:1"}, "", exitUsage, "looks like user:PASSWORD@ without a master"},
		{"sentinel password only, no master", []string{"--sentinel", "redis://s3cr" + "zzet@127.0.0.1:1"}, "", exitUsage, "no MASTER@ follows it"},
		// user:password@ where --cluster and --sentinel take none.
		{"cluster userinfo without scheme", []string{"--cluster", ":" + pw + "@127.0.0.1:1"}, "", exitUsage, "--cluster: a user:PASSWORD@ part needs redis:// or rediss://"},
		{"cluster userinfo in an item", []string{"--cluster", "redis://127.0.0.1:1,bob:" + pw + "@127.0.0.1:2"}, "", exitUsage, `the address "bob:xxxxx@127.0.0.1:2" carries a user:PASSWORD@ part`},
		{"cluster userinfo in a later item", []string{"--cluster", "redis://u:zzet@127.0.0.1:1,bob:" + pw + "@127.0.0.1:2"}, "", exitUsage, `"bob:xxxxx@127.0.0.1:2"`},
		{"sentinel userinfo without scheme", []string{"--sentinel", "bob:" + pw + "@mym@127.0.0.1:1"}, "", exitUsage, "--sentinel: a user:PASSWORD@ part needs redis://"},
		{"sentinel userinfo in an item", []string{"--sentinel=mym@127.0.0.1:1,:" + pw + "@127.0.0.1:2"}, "", exitUsage, `the address ":xxxxx@127.0.0.1:2"`},
		// A URL naming a database the server does not have is a bad URL.
		{"db out of range", []string{"--redis", "redis://default:right@" + addr + "/99"}, "", exitUsage, "the server has no database 99"},
	}
	for _, st := range stages {
		t.Run(st.name, func(t *testing.T) {
			t.Setenv(cliconn.EnvURL, st.env)
			for _, name := range commandNames() {
				args := append(strings.Fields(name), st.flag...)
				args = append(args, minimalArgs[name]...)
				code, out, errOut := runCmd(t, args...)
				all := out + errOut
				for _, secret := range []string{"s3cr", "zzet"} {
					if strings.Contains(all, secret) {
						t.Errorf("coordctl %s printed the password:\n%s", name, all)
					}
				}
				if code != st.code || !strings.Contains(errOut, st.want) || strings.Count(errOut, "\n") != 1 {
					t.Errorf("coordctl %s (%s): exit %d, stderr %q; want %d and one line with %q", name, st.name, code, errOut, st.code, st.want)
				}
			}
		})
	}
	// The right password works (and is not printed either).
	t.Setenv(cliconn.EnvURL, "")
	code, out, errOut := runCmd(t, "leader", "status", "--redis", "redis://default:right@"+addr+"/0", "--key", "k")
	if code != exitRefused || !strings.Contains(out, "no leader") || strings.Contains(out+errOut, "right@") {
		t.Fatalf("right password: %d %q %q", code, out, errOut)
	}
}

// A Sentinel master name is not a password: it is shown, not masked (it
// was once taken for a password, having an '@' after it). The plain server
// answers SENTINEL with an error that quotes the name.
func TestSentinelMasterNameShown(t *testing.T) {
	t.Setenv(cliconn.EnvURL, "")
	srv := testharness.StartStandalone(t, testharness.FirstFlavor(t))
	for _, v := range []string{"mymastername@" + srv.Addr, "redis://@mymastername@" + srv.Addr} {
		code, out, errOut := runCmd(t, "inspect", "k", "--sentinel", v)
		if code != exitConn || !strings.Contains(errOut, "'mymastername'") || strings.Contains(out+errOut, "xxxxx") {
			t.Errorf("--sentinel %s: exit %d, stderr %q; want 3 and the master name shown", v, code, errOut)
		}
	}
	// After a scheme the text before the first '@' is the userinfo (it
	// may be a password): a usage error, before any server is asked.
	for _, cmd := range [][]string{{"inspect", "k"}, {"leader", "status", "--key", "k"}} {
		for _, v := range []string{"redis://mymastername@" + srv.Addr, "redis://u:hunter2@" + srv.Addr, "u:hunter2@" + srv.Addr, "redis://hunter2@" + srv.Addr} {
			code, out, errOut := runCmd(t, append(cmd, "--sentinel", v)...)
			if code != exitUsage || strings.Contains(out+errOut, "hunter2") || strings.Contains(out+errOut, "mymastername") || !strings.Contains(errOut, "--sentinel") {
				t.Errorf("%s --sentinel %s: exit %d, stderr %q; want 2, nothing of the userinfo", cmd[0], v, code, errOut)
			}
		}
	}
}

// Every duration flag of every command refuses a negative value, and 0
// unless 0 has a documented meaning (--timeout 0: wait forever; --grace 0:
// SIGKILL at once): exit 2, one line naming the flag, before connecting.
func TestEveryDurationFlagRefusesNegative(t *testing.T) {
	t.Setenv(cliconn.EnvURL, "")
	zeroOK := map[string]bool{"timeout": true, "grace": true}
	n := 0
	for _, name := range commandNames() {
		_, help, _ := runCmd(t, append(strings.Fields(name), "--help")...)
		for line := range strings.SplitSeq(help, "\n") {
			f, ok := strings.CutPrefix(line, "  --")
			if !ok || !strings.HasSuffix(f, " duration") {
				continue
			}
			f = strings.TrimSuffix(f, " duration")
			for _, v := range []string{"-1s", "0"} {
				n++
				// After the minimal flags (which may set it too), before any "--".
				minimal := minimalArgs[name]
				i := slices.Index(minimal, "--")
				if i < 0 {
					i = len(minimal)
				}
				args := append(strings.Fields(name), minimal[:i]...)
				args = append(append(args, "--"+f, v), minimal[i:]...)
				code, _, errOut := runCmd(t, args...)
				if v == "0" && zeroOK[f] {
					if strings.Contains(errOut, "--"+f+" must") {
						t.Errorf("coordctl %s --%s 0 refused: %q", name, f, errOut)
					}
					continue
				}
				if code != exitUsage || !strings.Contains(errOut, "--"+f+" must") || strings.Count(errOut, "\n") != 1 {
					t.Errorf("coordctl %s --%s %s: exit %d, stderr %q; want 2 and one line naming --%s", name, f, v, code, errOut, f)
				}
			}
		}
	}
	if n < 20 {
		t.Fatalf("only %d duration flag cases found in the --help texts", n)
	}
}

// NOPERM, WRONGPASS and NOAUTH are named as such, each kind with its exit
// status (README's table): 5 for a command or key the ACL denies, met
// after connecting (it was once "lost the connection", exit 3), 4 for a
// refused user; every command alike.
func TestRefusalsNamedWithTheirStatus(t *testing.T) {
	t.Setenv(cliconn.EnvURL, "")
	srv := testharness.StartStandalone(t, testharness.FirstFlavor(t))
	raw := redis.NewClient(srv.Options())
	defer raw.Close()
	ctx := context.Background()
	// A user that may connect (PING, HELLO, CLIENT) and nothing else.
	if err := raw.Do(ctx, "ACL", "SETUSER", "pinger", "on", ">pw", "~*", "&*", "-@all", "+ping", "+hello", "+client", "+auth", "+select").Err(); err != nil {
		t.Fatal(err)
	}
	for _, name := range commandNames() {
		if name == "demo" {
			continue // a demo's scenarios report their own failures
		}
		args := append(append(strings.Fields(name), "--redis", "redis://pinger:pw@"+srv.Addr+"/0"), minimalArgs[name]...)
		code, out, errOut := runCmd(t, args...)
		if code != exitPerm || !strings.Contains(errOut, "NOPERM") || strings.Contains(errOut, "lost the connection") {
			t.Errorf("coordctl %s as a user the ACL denies: exit %d, stdout %q, stderr %q; want 5 and NOPERM", name, code, out, errOut)
		}
	}
	for _, c := range []struct {
		url, want string
	}{
		{"redis://pinger:wrong@" + srv.Addr + "/0", "(WRONGPASS)"},
		{"redis://nosuchuser:pw@" + srv.Addr + "/0", "(WRONGPASS)"},
	} {
		code, _, errOut := runCmd(t, "leader", "status", "--key", "k", "--redis", c.url)
		if code != exitAuth || !strings.Contains(errOut, c.want) {
			t.Errorf("%s: exit %d, stderr %q; want 4 and %s", cliconn.RedactURL(c.url), code, errOut, c.want)
		}
	}
	addr := authServer(t)
	code, _, errOut := runCmd(t, "inspect", "k", "--redis", "redis://"+addr+"/0")
	if code != exitAuth || !strings.Contains(errOut, "(NOAUTH)") {
		t.Errorf("no password: exit %d, stderr %q; want 4 and NOAUTH", code, errOut)
	}
}

// Passwords are removed by structure, not by searching the output for
// their text: with a one-letter password every other "e" of the output
// stays (issue 22: the filter garbled unrelated words and showed where the
// password's letters stood).
func TestOneLetterPasswordAltersNothing(t *testing.T) {
	t.Setenv(cliconn.EnvURL, "")
	srv := testharness.StartStandalone(t, testharness.FirstFlavor(t))
	raw := redis.NewClient(srv.Options())
	defer raw.Close()
	if err := raw.ConfigSet(context.Background(), "requirepass", "e").Err(); err != nil {
		t.Fatal(err)
	}
	url := "redis://default:e@" + srv.Addr + "/0"
	if code, out, errOut := runCmd(t, "leader", "status", "--key", "the-key", "--redis", url); code != exitRefused || out != "no leader for \"the-key\"\n" || errOut != "" {
		t.Errorf("leader status: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if code, out, _ := runCmd(t, "denylist", "add", "--key", "denied", "--redis", url, "eve"); code != exitOK || out != "eve: denied\n" {
		t.Errorf("denylist add: exit %d, stdout %q", code, out)
	}
	code, _, errOut := runCmd(t, "inspect", "k", "--redis", "redis://default:e@127.0.0.1:notaport/0")
	if want := "coordctl inspect: --redis redis://default:xxxxx@127.0.0.1:notaport/0: the port is not a number; want redis://"; code != exitUsage || !strings.HasPrefix(errOut, want) {
		t.Errorf("bad port: exit %d, stderr %q; want it to start with %q", code, errOut, want)
	}
	code, _, errOut = runCmd(t, "leader", "status", "--key", "k", "--redis", "redis://default:x@"+srv.Addr+"/0")
	if want := "coordctl leader status: the server refused the user name or password (WRONGPASS): check the user:PASSWORD part of the URL, e.g. --redis " + cliconn.ExampleURL + "\n"; code != exitAuth || errOut != want {
		t.Errorf("wrong one-letter password: exit %d, stderr %q; want %q", code, errOut, want)
	}
	// An argument echoed in a usage error: its credential part only.
	code, _, errOut = runCmd(t, "leader", "status", "--key", "k", "--redis", url, "redis://bob:e@host:1/0", "eel")
	if want := `unexpected arguments ["redis://bob:xxxxx@host:1/0" "eel"]`; code != exitUsage || !strings.Contains(errOut, want) {
		t.Errorf("echoed URL: exit %d, stderr %q; want %q", code, errOut, want)
	}
}

// A bad whole number gets an example value that the flag then accepts
// (issue 22: --count's example was its "required" default, -1, which
// --count refuses), for every whole-number flag of every command.
func TestEveryIntFlagSuggestsAnAcceptedValue(t *testing.T) {
	t.Setenv(cliconn.EnvURL, "")
	n := 0
	for _, name := range commandNames() {
		_, help, _ := runCmd(t, append(strings.Fields(name), "--help")...)
		for line := range strings.SplitSeq(help, "\n") {
			f, ok := strings.CutPrefix(line, "  --")
			if !ok || !strings.HasSuffix(f, " int") {
				continue
			}
			f = strings.TrimSuffix(f, " int")
			n++
			minimal := minimalArgs[name]
			if name == "repair latch" && f == "reset" {
				minimal = []string{"--key", "k"} // --reset N replaces the minimal --delete
			}
			i := slices.Index(minimal, "--")
			if i < 0 {
				i = len(minimal)
			}
			with := func(v string) []string {
				args := append(strings.Fields(name), minimal[:i]...)
				return append(append(args, "--"+f, v), minimal[i:]...)
			}
			_, _, errOut := runCmd(t, with("x")...)
			_, ex, ok := strings.Cut(errOut, "e.g. --"+f+" ")
			if !ok {
				t.Errorf("coordctl %s --%s x: no example in %q", name, f, errOut)
				continue
			}
			ex, _, _ = strings.Cut(ex, " ")
			if _, _, errOut := runCmd(t, with(ex)...); strings.Contains(errOut, "--"+f) {
				t.Errorf("coordctl %s --%s %s (the suggested value) is refused: %q", name, f, ex, errOut)
			}
		}
	}
	if n < 10 {
		t.Fatalf("only %d whole-number flags found in the --help texts", n)
	}
}
