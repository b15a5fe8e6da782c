// Command scriptcost counts the CPU instructions a Redis server spends on
// one run of each rate-limit decision script: a measure that a shared,
// noisy machine does not move (the same binary, script and state give the
// same count within about 1%, whatever else runs), to compare two versions
// of a script where server time from INFO commandstats swings by 10-50%.
// With -semaphore DIR it runs semaphore acquire + release pairs instead,
// DIR holding the earlier semaphore_acquire.lua and semaphore_release.lua
// (assembled: the text package lua serves, fragments in; -dump DIR, run
// in the earlier checkout, writes them), beside the lock's pair as the
// baseline (SET NX GET PX, then lock_release; SET is collected too in
// this mode).
// With -fencing DIR it runs the fencing lock's acquire + release pairs
// instead, the scripts of this checkout beside those in DIR (an earlier
// fencing_acquire.lua and fencing_release.lua), next to the plain lock's
// pair (SET NX GET PX, then lock_release.lua) as the baseline, and each
// half alone; since the lock's acquire is a command and not a script, this
// mode collects inside processCommand (the whole command: its lookup, ACL
// check and run), for every row alike, and also prints MEMORY USAGE of an
// idle held lease (40-byte key names).
// With -begin it runs idempotency Begin on a fresh key (a new pending
// claim, the row of BenchmarkIdempotencyBegin) beside the floor script
// (TIME + GET + SET PX, also on a fresh key) and the no-op script, and,
// with -old, an earlier idempotency_begin.lua (one taking the arguments
// of the script before b009713: owner, TTL, claim start, fingerprint part,
// claim middle).
// With -conc DIR it runs concurrency-limiter lease acquire + release
// pairs (a 1-permit lease, limit 200, alone and beside 100 live leases),
// the scripts of this checkout beside those in DIR (an earlier
// ratelimit_conc_acquire.lua and ratelimit_conc_release.lua, as -dump
// writes them).
// With -usec it measures server time instead, finely interleaved: a plain
// redis-server, every case run -n times in turn, -chunks rounds, each
// case's µs per call from the growth of INFO commandstats over its own
// chunk; it prints the median, lowest and quartiles over the rounds.
//
// It starts redis-server under valgrind's callgrind, collecting only inside
// evalShaCommand (the whole script run, the commands it calls included),
// loads the library's scripts (the assembled text package lua serves) and,
// with -old, a second script to compare (an earlier ratelimit_decide.lua,
// for instance), then for each case runs the script -n times on one key
// after a warm-up and prints instructions per call (Ir/call). Cases:
// a grant on a limiter whose limit is never reached (each algorithm and
// a composite of three, the rows of BenchmarkRateLimitDecision), a refusal
// (limit reached) and a probe (0 permits). Reference cases run first: the
// floor script (TIME + GET + SET PX, bench's floorScript), ulule/limiter's
// fixed-window script and go-redis/redis_rate's GCRA script, granting as
// bench/ratelimit_test.go calls them; every row is also given as a ratio
// to the floor's and to ulule's count.
//
//	. ~/.cache/redis-servers/env.sh   # REDIS8_SERVER: a build with symbols
//	cd bench && go run ./cmd/scriptcost
//	git show 5656b52:lua/ratelimit_decide.lua > /tmp/old.lua
//	cd bench && go run ./cmd/scriptcost -old /tmp/old.lua   # before and after, case by case
//	cd bench && go run ./cmd/scriptcost -old /tmp/old.lua -usec -n 2000 -chunks 21
//	(earlier checkout) cd bench && go run ./cmd/scriptcost -dump /tmp/sem
//	cd bench && go run ./cmd/scriptcost -semaphore /tmp/sem   # lock pair, then old and new semaphore pairs
//	cd bench && go run ./cmd/scriptcost -rwlease /tmp/rw      # old and new read-write lease pairs
//	cd bench && go run ./cmd/scriptcost -begin -n 500   # Begin against the floor script
//	cd bench && go run ./cmd/scriptcost -conc /tmp/conc  # old and new concurrency lease pairs
//
// Needs valgrind (Debian package valgrind) and a redis-server with its
// symbols (get-servers.sh builds Redis 8 with them; Debian's Redis 7.0 is
// stripped).
package main

import (
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/coordkit/coordination/bench/internal/port"
	"github.com/coordkit/coordination/lua"
)

// step is one script run of a case: its script (new: by name in package
// lua; old: the -old file), the key, and ARGV ("{id}": 8 fresh random
// bytes).
type step struct {
	name, script, key string
	src               string // a reference case's script text (script empty)
	old               bool
	args              []string
	oldTTL            string // the old script's ARGV[5]
	warm              int
}

const huge = "1073741824" // 1<<30: a limit never reached

// floorScript is bench's floor script (bench_test.go): server TIME, one
// GET and one SET PX, the least a claim-shaped script costs.
const floorScript = `
local t = redis.call('TIME')
local v = redis.call('GET', KEYS[1])
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1`

// ululeScript is github.com/ulule/limiter/v3's Redis store script
// (drivers/store/redis, luaIncrScript, v3.11.2), which its Get and
// Increment run: a fixed window as INCRBY, then PEXPIRE on the first hit
// of a window or PTTL otherwise.
const ululeScript = `
local key = KEYS[1]
local count = tonumber(ARGV[1])
local ttl = tonumber(ARGV[2])
local ret = redis.call("incrby", key, ARGV[1])
if ret == count then
	if ttl > 0 then
		redis.call("pexpire", key, ARGV[2])
	end
	return {ret, ttl}
end
ttl = redis.call("pttl", key)
return {ret, ttl}
`

// redisRateScript is github.com/go-redis/redis_rate/v10's allowN script
// (lua.go, v10.0.1; Copyright (c) 2017 Pavel Pravosud), which its Allow
// and AllowN run: GCRA on a float arrival time.
const redisRateScript = `
-- this script has side-effects, so it requires replicate commands mode
redis.replicate_commands()

local rate_limit_key = KEYS[1]
local burst = ARGV[1]
local rate = ARGV[2]
local period = ARGV[3]
local cost = tonumber(ARGV[4])

local emission_interval = period / rate
local increment = emission_interval * cost
local burst_offset = emission_interval * burst

-- redis returns time as an array containing two integers: seconds of the epoch
-- time (10 digits) and microseconds (6 digits). for convenience we need to
-- convert them to a floating point number. the resulting number is 16 digits,
-- bordering on the limits of a 64-bit double-precision floating point number.
-- adjust the epoch to be relative to Jan 1, 2017 00:00:00 GMT to avoid floating
-- point problems. this approach is good until "now" is 2,483,228,799 (Wed, 09
-- Sep 2048 01:46:39 GMT), when the adjusted value is 16 digits.
local jan_1_2017 = 1483228800
local now = redis.call("TIME")
now = (now[1] - jan_1_2017) + (now[2] / 1000000)

local tat = redis.call("GET", rate_limit_key)

if not tat then
  tat = now
else
  tat = tonumber(tat)
end

tat = math.max(tat, now)

local new_tat = tat + increment
local allow_at = new_tat - burst_offset

local diff = now - allow_at
local remaining = diff / emission_interval

if remaining < 0 then
  local reset_after = tat - now
  local retry_after = diff * -1
  return {
    0, -- allowed
    0, -- remaining
    tostring(retry_after),
    tostring(reset_after),
  }
end

local reset_after = new_tat - now
if reset_after > 0 then
  redis.call("SET", rate_limit_key, new_tat, "EX", math.ceil(reset_after))
end
local retry_after = -1
return {cost, remaining, tostring(retry_after), tostring(reset_after)}
`

// refs are the reference cases, run before the library's: the floor
// script and the peers' scripts, as bench/ratelimit_test.go calls them
// (a limit never reached).
func refs() []step {
	return []step{
		{name: "floor grant", src: floorScript, key: "ref:floor", args: []string{"1700000000", "60000"}, warm: 10},
		{name: "ulule fixed grant", src: ululeScript, key: "ref:ulule", args: []string{"1", "3600000"}, warm: 10},
		{name: "redis_rate gcra grant", src: redisRateScript, key: "ref:redis_rate", args: []string{huge, "1000", "1", "1"}, warm: 10},
	}
}

// cases returns the cases in pairs (old, then new) when old is set, else
// the new ones. The old script takes the key's TTL after a fast-path grant
// as a fifth argument, and upper-case operations for a composite.
func cases(old bool) []step {
	type alg struct {
		name, grant, grantTTL, refuse, refuseTTL string
	}
	algs := []alg{
		{"fixed", "f:" + huge + ":3600000", "3600000", "f:5:3600000", "3600000"},
		{"sliding", "s:" + huge + ":3600000000:10", "3960000", "s:5:3600000000:10", "3960000"},
		{"bucket", "b:" + huge + ":" + huge + ":3600000000", "3600000", "b:5:1:3600000000", "18000000"},
		{"gcra", "g:" + huge + ":1000000:1", "1073741824000", "g:5:1000000000:1", "5000000000"},
	}
	var out []step
	add := func(s step) {
		if old {
			o := s
			o.name, o.old, o.key = "old "+s.name, true, "old:"+s.key
			// The old layout: the call's id (8 bytes; empty for a probe)
			// after op and permits.
			id := "{id}"
			if s.args[1] == "0" {
				id = ""
			}
			o.args = append([]string{s.args[0], s.args[1], id}, s.args[2:]...)
			if strings.HasPrefix(s.script, "ratelimit_composite") {
				o.args[0] = strings.ToUpper(o.args[0])
			} else {
				o.args = append(o.args, s.oldTTL)
			}
			out = append(out, o)
			s.name = "new " + s.name
		}
		out = append(out, s)
	}
	for _, a := range algs {
		script := "ratelimit_" + a.name
		add(step{name: a.name + " grant", script: script, key: a.name + ":grant", args: []string{"d", "1", a.grant}, oldTTL: a.grantTTL, warm: 10})
		add(step{name: a.name + " refusal", script: script, key: a.name + ":refuse", args: []string{"d", "1", a.refuse}, oldTTL: a.refuseTTL, warm: 10})
		add(step{name: a.name + " probe", script: script, key: a.name + ":grant", args: []string{"d", "0", a.grant}, oldTTL: a.grantTTL})
	}
	comp := func(cfgs ...string) []string {
		return append([]string{"d", "1", strings.Join(cfgs, ";")}, cfgs...)
	}
	if !old {
		// The throttle (a refusal writes: the new end of the block) and the
		// sliding log, whose cost grows with its entries: a grant on a log
		// that stays nearly empty (a 1 ms window), a refusal on 5 entries
		// and one on a full log of 1000 (the largest Limit).
		add(step{name: "throttle grant", script: "ratelimit_throttle", key: "throttle:grant", args: []string{"d", "1", "t:" + huge + ":3600000"}, warm: 10})
		add(step{name: "throttle refusal", script: "ratelimit_throttle", key: "throttle:refuse", args: []string{"d", "1", "t:5:3600000"}, warm: 10})
		add(step{name: "log grant", script: "ratelimit_log", key: "log:grant", args: []string{"d", "1", "l:1000:1000"}, warm: 10})
		add(step{name: "log-5 refusal", script: "ratelimit_log", key: "log:refuse", args: []string{"d", "1", "l:5:3600000000"}, warm: 10})
		add(step{name: "log-1000 refusal", script: "ratelimit_log", key: "log:full", args: []string{"d", "1", "l:1000:3600000000"}, warm: 1010})
	}
	add(step{name: "composite-3 grant", script: "ratelimit_composite", key: "comp:grant", warm: 10,
		args: comp("b:"+huge+":2:1000000", "s:"+huge+":60000000:10", "f:"+huge+":3600000")})
	add(step{name: "composite-3 refusal", script: "ratelimit_composite", key: "comp:refuse", warm: 10,
		args: comp("b:5:1:3600000000", "s:5:3600000000:10", "f:5:3600000")})
	return out
}

func main() {
	n := flag.Int("n", 3000, "script runs per case")
	oldFile := flag.String("old", "", "an earlier decision script to run beside each case (the one-script layout: ARGV[5] a TTL, upper-case composite operations)")
	server := flag.String("server", os.Getenv("REDIS8_SERVER"), "redis-server binary, with symbols (default $REDIS8_SERVER)")
	usec := flag.Bool("usec", false, "measure server µs per call (INFO commandstats, interleaved rounds) instead of instructions")
	chunks := flag.Int("chunks", 21, "with -usec: rounds")
	grantsOnly := flag.Bool("grants", false, "only the grant cases")
	fenceOld := flag.String("fencing", "", "instead of the rate limiters: fencing lock acquire + release pairs and the plain lock's pair, the scripts of this checkout beside those in this directory (fencing_acquire.lua and fencing_release.lua of an earlier commit)")
	begin := flag.Bool("begin", false, "instead of the rate limiters: idempotency Begin on a fresh key beside the floor script and the no-op script (with -old: an earlier idempotency_begin.lua too, one taking the arguments of the script before b009713)")
	semOld := flag.String("semaphore", "", "instead of the rate limiters: semaphore acquire + release pairs, the scripts of this checkout beside those in this directory (semaphore_acquire.lua and semaphore_release.lua of an earlier commit)")
	concOld := flag.String("conc", "", "instead of the rate limiters: concurrency lease acquire + release pairs, the scripts of this checkout beside those in this directory (ratelimit_conc_acquire.lua and ratelimit_conc_release.lua of an earlier commit, as -dump writes them)")
	rwOld := flag.String("rwlease", "", "instead of the rate limiters: read-write lease acquire + release pairs (read and write), the scripts of this checkout beside those in this directory (rwlease_acquire.lua and rwlease_release.lua of an earlier commit, as -dump writes them)")
	dump := flag.String("dump", "", "write this checkout's assembled semaphore_acquire.lua, semaphore_release.lua, rwlease_acquire.lua, rwlease_release.lua, ratelimit_conc_acquire.lua and ratelimit_conc_release.lua (the text the library runs) into this directory and exit: the -semaphore, -rwlease or -conc directory of a later comparison")
	keep := flag.String("keep", "", "keep callgrind's dumps in this directory (cg.out.<i>: case i, from 1; and <case>.out per rate-limit case; for callgrind_annotate)")
	flag.Parse()
	if *dump != "" {
		for _, n := range []string{"semaphore_acquire", "semaphore_release", "rwlease_acquire", "rwlease_release", "ratelimit_conc_acquire", "ratelimit_conc_release"} {
			if err := os.WriteFile(filepath.Join(*dump, n+".lua"), []byte(newScript(n)), 0o644); err != nil {
				fail(err.Error())
			}
		}
		return
	}
	if *server == "" {
		fail("no redis-server: set REDIS8_SERVER (. ~/.cache/redis-servers/env.sh) or -server")
	}
	var oldSrc string
	if *oldFile != "" {
		b, err := os.ReadFile(*oldFile)
		if err != nil {
			fail(err.Error())
		}
		oldSrc = string(b)
	}
	dir := *keep
	if dir == "" {
		d, err := os.MkdirTemp("", "scriptcost")
		if err != nil {
			fail(err.Error())
		}
		defer os.RemoveAll(d)
		dir = d
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		fail(err.Error())
	}
	port := freePort()
	srv := []string{*server, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"}
	collect := "evalShaCommand"
	if *fenceOld != "" {
		// The lock's acquire is a command: collect every command whole.
		// (Not call(): scripts call it for their commands, and a nested
		// toggle would stop the collection.)
		collect = "processCommand"
	}
	if !*usec {
		vg := []string{"valgrind", "--tool=callgrind", "--toggle-collect=" + collect}
		if *semOld != "" {
			// The lock pair's acquire is a plain SET (no script calls SET
			// in this mode: a nested toggle would stop the collection).
			vg = append(vg, "--toggle-collect=setCommand")
		}
		srv = append(append(vg, "--callgrind-out-file="+filepath.Join(dir, "cg.out")), srv...)
	}
	vg := exec.Command(srv[0], srv[1:]...)
	if err := vg.Start(); err != nil {
		fail("valgrind: " + err.Error())
	}
	defer func() { _ = vg.Process.Kill(); _ = vg.Wait() }()
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(port), ReadTimeout: time.Minute})
	defer c.Close()
	for i := 0; c.Ping(ctx).Err() != nil; i++ {
		if i > 300 {
			fail("redis-server under valgrind did not answer in 60 s")
		}
		time.Sleep(200 * time.Millisecond)
	}
	pid := strconv.Itoa(vg.Process.Pid)
	if *fenceOld != "" {
		if *usec {
			fail("-fencing counts instructions only")
		}
		fencingMain(ctx, c, pid, dir, *n, *fenceOld)
		return
	}
	var (
		todo []step
		runs []func() error
	)
	switch {
	case *begin:
		todo, runs = beginCases(ctx, c, oldSrc)
	case *semOld != "":
		todo, runs = semaphoreCases(ctx, c, *semOld)
	case *rwOld != "":
		todo, runs = rwleaseCases(ctx, c, *rwOld)
	case *concOld != "":
		todo, runs = concCases(ctx, c, *concOld)
	default:
		for _, s := range append(refs(), cases(oldSrc != "")...) {
			if !*grantsOnly || strings.HasSuffix(s.name, "grant") {
				todo = append(todo, s)
			}
		}
		runs = make([]func() error, len(todo))
		for i, s := range todo {
			src := oldSrc
			if s.src != "" {
				src = s.src
			} else if !s.old {
				src = newScript(s.script)
			}
			sha := load(ctx, c, src)
			runs[i] = func() error {
				args := make([]any, len(s.args))
				for i, a := range s.args {
					if a == "{id}" {
						id := make([]byte, 8)
						_, _ = rand.Read(id)
						a = string(id)
					}
					args[i] = a
				}
				return c.EvalSha(ctx, sha, []string{s.key}, args...).Err()
			}
		}
	}
	for i, s := range todo {
		for range s.warm + 1 {
			if err := runs[i](); err != nil {
				fail(s.name + ": " + err.Error())
			}
		}
	}
	repeat := func(i int) {
		for range *n {
			if err := runs[i](); err != nil {
				fail(todo[i].name + ": " + err.Error())
			}
		}
	}
	if *usec {
		per := make([][]float64, len(todo))
		for range *chunks {
			for i := range todo {
				c0, u0 := evalshaStats(ctx, c)
				repeat(i)
				c1, u1 := evalshaStats(ctx, c)
				per[i] = append(per[i], float64(u1-u0)/float64(c1-c0))
			}
		}
		fmt.Printf("| case | server µs/call, median | lowest | quartiles |\n|---|---|---|---|\n")
		for i, s := range todo {
			x := slices.Sorted(slices.Values(per[i]))
			fmt.Printf("| %s | %.2f | %.2f | %.2f-%.2f |\n", s.name, x[len(x)/2], x[0], x[len(x)/4], x[3*len(x)/4])
		}
		return
	}
	ir := make(map[string]int64, len(todo))
	for i, s := range todo {
		control("-z", pid)
		repeat(i)
		before, _ := filepath.Glob(filepath.Join(dir, "cg.out.*"))
		control("-d", pid)
		ir[s.name] = totalIr(dir, len(before)) / int64(*n)
		if *keep != "" {
			b, err := os.ReadFile(filepath.Join(dir, "cg.out."+strconv.Itoa(len(before)+1)))
			if err == nil {
				err = os.WriteFile(filepath.Join(*keep, strings.ReplaceAll(s.name, " ", "_")+".out"), b, 0o644)
			}
			if err != nil {
				fail(err.Error())
			}
		}
	}
	fmt.Printf("| case | Ir/call | / floor | / ulule |\n|---|---|---|---|\n")
	for _, s := range todo {
		ratio := func(ref string) string {
			if ir[ref] == 0 {
				return ""
			}
			return fmt.Sprintf("%.2f", float64(ir[s.name])/float64(ir[ref]))
		}
		fmt.Printf("| %s | %d | %s | %s |\n", s.name, ir[s.name], ratio("floor grant"), ratio("ulule fixed grant"))
	}
}

// newScript returns the assembled text package lua serves for name.
func newScript(name string) string {
	b, err := fs.ReadFile(lua.FS(), name+".lua")
	if err != nil {
		fail(err.Error())
	}
	return string(b)
}

// load loads src into the server and returns its SHA1.
func load(ctx context.Context, c *redis.Client, src string) string {
	sha, err := c.ScriptLoad(ctx, src).Result()
	if err != nil {
		fail(err.Error())
	}
	return sha
}

// beginCases returns the no-op script, the floor script and Begin (and,
// when old is set, the earlier Begin script old), each run on a fresh key
// with the arguments idempotency.Store.Begin sends for a 1 min claim
// without a fingerprint (a 22-byte owner token; old: in the layout before
// b009713). The database is first
// filled with 40,000 keys, so that the keys the runs add never make the
// server grow its key table in the middle of a case.
func beginCases(ctx context.Context, c *redis.Client, old string) ([]step, []func() error) {
	p := c.Pipeline()
	for i := range 40000 {
		p.Set(ctx, fmt.Sprintf("fill:%d", i), "x", 0)
	}
	if _, err := p.Exec(ctx); err != nil {
		fail(err.Error())
	}
	type script struct{ name, src string }
	scripts := []script{{"no-op script (return 1)", "return 1"}, {"floor script: TIME + GET + SET PX", floorScript}}
	if old != "" {
		scripts = append(scripts, script{"old Begin", old})
	}
	scripts = append(scripts, script{"Begin", newScript("idempotency_begin")})
	var (
		todo []step
		runs []func() error
	)
	for i, sc := range scripts {
		sha := load(ctx, c, sc.src)
		n := 0
		todo = append(todo, step{name: sc.name + ", fresh key", warm: 10})
		runs = append(runs, func() error {
			n++
			key := fmt.Sprintf("idem:%d:%d", i, n)
			tok := make([]byte, 11)
			_, _ = rand.Read(tok)
			token := fmt.Sprintf("%x", tok) // 22 bytes, as an owner token
			switch {
			case sc.src == floorScript:
				return c.EvalSha(ctx, sha, []string{key}, token, 60000).Err()
			case sc.name == "old Begin":
				// The arguments of the script before b009713.
				return c.EvalSha(ctx, sha, []string{key}, token, 60000, "P60000:", "-:", ":"+token+":").Err()
			}
			return c.EvalSha(ctx, sha, []string{key}, 60000, ":"+token+":-:").Err()
		})
	}
	return todo, runs
}

// semaphoreCases returns the lock pair (the baseline), then, for the
// scripts in oldDir and then this checkout's, one acquire + release of a permit (capacity 200) on a key
// where it is the only permit (TTL 1 h), and on a key where 100 others are
// live (TTL 1 h): the pair's permit the latest (TTL 1 h: its release moves
// the key's TTL) or not (TTL 1 min, as in BenchmarkPaired's
// coordination-semaphore-100held row). The release is given a second key,
// the release mark that scripts before 7165ced wrote (as a client with
// retries sent it); this checkout's script takes one key and ignores it.
func semaphoreCases(ctx context.Context, c *redis.Client, oldDir string) ([]step, []func() error) {
	var (
		todo []step
		runs []func() error
	)
	// The baseline: the lock's pair, SET key token NX GET PX ttl (as
	// package lock sends it) and lock_release.
	lockSHA := load(ctx, c, newScript("lock_release"))
	todo = append(todo, step{name: "lock pair (SET NX GET PX + lock_release)", warm: 10})
	runs = append(runs, func() error {
		id := make([]byte, 16)
		_, _ = rand.Read(id)
		tok := fmt.Sprintf("%x", id)[:22]
		if err := c.Do(ctx, "set", "lock:pair", tok, "nx", "get", "px", "30000").Err(); err != nil && err != redis.Nil {
			return err
		}
		return c.EvalSha(ctx, lockSHA, []string{"lock:pair"}, tok).Err()
	})
	for _, side := range []string{"old", "new"} {
		acq, rel := newScript("semaphore_acquire"), newScript("semaphore_release")
		if side == "old" {
			acq, rel = readFile(filepath.Join(oldDir, "semaphore_acquire.lua")), readFile(filepath.Join(oldDir, "semaphore_release.lua"))
		}
		acqSHA, relSHA := load(ctx, c, acq), load(ctx, c, rel)
		for _, cs := range []struct {
			others int
			ttl    string // the pair's permit's TTL in ms; the others' is 1 h
			name   string
		}{
			{0, "3600000", "0 other holders"},
			{100, "3600000", "100 other holders, the latest"},
			{100, "60000", "100 other holders, not the latest"},
		} {
			key := fmt.Sprintf("%s:sem:%d:%s", side, cs.others, cs.ttl)
			for i := range cs.others {
				member := fmt.Sprintf("P:1:other-%03d", i)
				if err := c.EvalSha(ctx, acqSHA, []string{key}, member, "3600000", "200", "0").Err(); err != nil {
					fail(err.Error())
				}
			}
			todo = append(todo, step{name: fmt.Sprintf("%s semaphore pair, %s", side, cs.name), warm: 10})
			runs = append(runs, func() error {
				id := make([]byte, 16)
				_, _ = rand.Read(id)
				member := fmt.Sprintf("P:1:%x", id)
				if err := c.EvalSha(ctx, acqSHA, []string{key}, member, cs.ttl, "200", "0").Err(); err != nil {
					return err
				}
				return c.EvalSha(ctx, relSHA, []string{key, key + ":mark"}, member).Err()
			})
		}
	}
	return todo, runs
}

// rwleaseCases returns, for the scripts in oldDir and then this
// checkout's, one acquire + release of a read lease on a key it holds
// alone, of a read lease beside 10 live readers, and of the write lease
// (TTL 1 min; the readers' 1 h), as a blocking phase-fair Read or Write
// sends them (a reader honouring waiting writers; the write lease with a
// 10 s waiting marker).
func rwleaseCases(ctx context.Context, c *redis.Client, oldDir string) ([]step, []func() error) {
	var (
		todo []step
		runs []func() error
	)
	for _, side := range []string{"old", "new"} {
		acq, rel := newScript("rwlease_acquire"), newScript("rwlease_release")
		if side == "old" {
			acq, rel = readFile(filepath.Join(oldDir, "rwlease_acquire.lua")), readFile(filepath.Join(oldDir, "rwlease_release.lua"))
		}
		acqSHA, relSHA := load(ctx, c, acq), load(ctx, c, rel)
		for _, cs := range []struct {
			mode   string
			others int
			name   string
		}{
			{"R:", 0, "read pair, alone"},
			{"R:", 10, "read pair, 10 other readers"},
			{"W:", 0, "write pair"},
		} {
			key := fmt.Sprintf("%s:rw:%s:%d", side, cs.mode, cs.others)
			for i := range cs.others {
				if err := c.EvalSha(ctx, acqSHA, []string{key}, fmt.Sprintf("R:other-%03d", i), "3600000", "1").Err(); err != nil {
					fail(err.Error())
				}
			}
			extra := []any{"1", "10000"}
			if cs.mode == "W:" {
				extra = []any{"10000"}
			}
			todo = append(todo, step{name: fmt.Sprintf("%s rwlease %s", side, cs.name), warm: 10})
			runs = append(runs, func() error {
				id := make([]byte, 16)
				_, _ = rand.Read(id)
				member := fmt.Sprintf("%s%x", cs.mode, id)
				if err := c.EvalSha(ctx, acqSHA, []string{key}, append([]any{member, "60000"}, extra...)...).Err(); err != nil {
					return err
				}
				return c.EvalSha(ctx, relSHA, []string{key}, member).Err()
			})
		}
	}
	return todo, runs
}

// concCases returns, for the scripts in oldDir and then this checkout's,
// one acquire + release of a 1-permit concurrency lease (limit 200, lease
// 30 s, as ratelimit.ConcurrencyLimiter.TryAcquire and
// ConcurrencyLease.Release send them) on a key where it is the only lease,
// and on a key where 100 others are live (lease 1 h).
func concCases(ctx context.Context, c *redis.Client, oldDir string) ([]step, []func() error) {
	var (
		todo []step
		runs []func() error
	)
	for _, side := range []string{"old", "new"} {
		acq, rel := newScript("ratelimit_conc_acquire"), newScript("ratelimit_conc_release")
		if side == "old" {
			acq, rel = readFile(filepath.Join(oldDir, "ratelimit_conc_acquire.lua")), readFile(filepath.Join(oldDir, "ratelimit_conc_release.lua"))
		}
		acqSHA, relSHA := load(ctx, c, acq), load(ctx, c, rel)
		for _, others := range []int{0, 100} {
			key := fmt.Sprintf("%s:conc:%d", side, others)
			for i := range others {
				if err := c.EvalSha(ctx, acqSHA, []string{key}, fmt.Sprintf("1:other-%03d", i), "3600000", "200", "1", "0").Err(); err != nil {
					fail(err.Error())
				}
			}
			todo = append(todo, step{name: fmt.Sprintf("%s concurrency pair, %d other leases", side, others), warm: 10})
			runs = append(runs, func() error {
				id := make([]byte, 16)
				_, _ = rand.Read(id)
				member := fmt.Sprintf("1:%x", id)[:24]
				if err := c.EvalSha(ctx, acqSHA, []string{key}, member, "30000", "200", "1", "0").Err(); err != nil {
					return err
				}
				return c.EvalSha(ctx, relSHA, []string{key}, member).Err()
			})
		}
	}
	return todo, runs
}

func readFile(name string) string {
	b, err := os.ReadFile(name)
	if err != nil {
		fail(err.Error())
	}
	return string(b)
}

var evalshaRe = regexp.MustCompile(`cmdstat_evalsha:calls=(\d+),usec=(\d+)`)

// evalshaStats returns INFO commandstats' calls and usec of EVALSHA.
func evalshaStats(ctx context.Context, c *redis.Client) (calls, usec int64) {
	m := evalshaRe.FindStringSubmatch(c.Info(ctx, "commandstats").Val())
	if m == nil {
		fail("INFO commandstats has no evalsha line")
	}
	calls, _ = strconv.ParseInt(m[1], 10, 64)
	usec, _ = strconv.ParseInt(m[2], 10, 64)
	return calls, usec
}

// control runs callgrind_control (zero the counters, or dump them).
func control(args ...string) {
	if out, err := exec.Command("callgrind_control", args...).CombinedOutput(); err != nil {
		fail(fmt.Sprintf("callgrind_control %v: %v: %s", args, err, out))
	}
}

// totalIr waits for dump number seen+1 and returns its instruction total.
func totalIr(dir string, seen int) int64 {
	for range 100 {
		fs, _ := filepath.Glob(filepath.Join(dir, "cg.out.*"))
		if len(fs) > seen {
			f := filepath.Join(dir, "cg.out."+strconv.Itoa(seen+1))
			b, err := os.ReadFile(f)
			if err == nil {
				for line := range strings.Lines(string(b)) {
					if v, ok := strings.CutPrefix(line, "summary: "); ok {
						n, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
						return n
					}
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	fail("no callgrind dump appeared")
	return 0
}

func freePort() int {
	p, err := port.Free()
	if err != nil {
		fail(err.Error())
	}
	return p
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "scriptcost:", msg)
	os.Exit(1)
}
