// Command fencememory measures what fence counters cost in server memory
// per fenced name: N counters written as the fencing acquire script writes
// them, in the layout before issue 24 (one string key per name, INCR) and
// in the shared layout (a field per name in the shared counter hash of the
// name's Cluster slot, HINCRBY), once with names spread over every slot
// (names with hash tags of their own) and once with every name in one
// slot (a key prefix with a hash tag). Each layout runs on a fresh
// redis-server (default $REDIS8_SERVER, no persistence) and is reported
// as the growth of INFO used_memory, the sum of MEMORY USAGE (SAMPLES 0)
// over the keys written, and the number of keys.
//
//	. ~/.cache/redis-servers/env.sh
//	cd bench && go run ./cmd/fencememory -n 1000000
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/coordkit/coordination/internal/fencingcore"
)

func main() {
	n := flag.Int("n", 1_000_000, "fenced names")
	server := flag.String("server", os.Getenv("REDIS8_SERVER"), "redis-server binary (default $REDIS8_SERVER)")
	flag.Parse()
	if *server == "" {
		fail("no redis-server: set REDIS8_SERVER (. ~/.cache/redis-servers/env.sh) or -server")
	}
	fmt.Printf("%d fenced names, counter keys named {invoice:<i>}:fence (23-29 bytes), each counter at 1..5\n\n", *n)
	fmt.Printf("| layout | keys | used_memory growth | B per name | MEMORY USAGE sum | B per name |\n|---|---|---|---|---|---|\n")
	layouts := []struct {
		name, prefix string
		shared       bool
	}{
		{"one string key per name (before)", "", false},
		{"shared hash per slot, names over all slots", "", true},
		{"shared hash per slot, every name in one slot (prefix {app}:)", "{app}:", true},
	}
	for _, l := range layouts {
		measure(*server, *n, l.name, l.prefix, l.shared)
	}
}

func measure(server string, n int, name, prefix string, shared bool) {
	port := freePort()
	cmd := exec.Command(server, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err := cmd.Start(); err != nil {
		fail(err.Error())
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(port), ReadTimeout: time.Minute})
	defer c.Close()
	for i := 0; c.Ping(ctx).Err() != nil; i++ {
		if i > 100 {
			fail("redis-server did not answer")
		}
		time.Sleep(100 * time.Millisecond)
	}
	before := usedMemory(ctx, c)
	keys := map[string]struct{}{}
	const batch = 1000
	for i := 0; i < n; i += batch {
		p := c.Pipeline()
		for j := i; j < min(i+batch, n); j++ {
			fk := prefix + "{invoice:" + strconv.Itoa(j) + "}:fence"
			incr := 1 + j%5
			if shared {
				h := fencingcore.SharedKeyOf(prefix, fk)
				p.HIncrBy(ctx, h, fk, int64(incr))
				keys[h] = struct{}{}
			} else {
				p.IncrBy(ctx, fk, int64(incr))
				keys[fk] = struct{}{}
			}
		}
		if _, err := p.Exec(ctx); err != nil {
			fail(err.Error())
		}
	}
	after := usedMemory(ctx, c)
	var sum int64
	p := c.Pipeline()
	cmds := make([]*redis.IntCmd, 0, len(keys))
	for k := range keys {
		cmds = append(cmds, p.MemoryUsage(ctx, k, 0))
		if len(cmds)%batch == 0 {
			if _, err := p.Exec(ctx); err != nil {
				fail(err.Error())
			}
		}
	}
	if _, err := p.Exec(ctx); err != nil {
		fail(err.Error())
	}
	for _, r := range cmds {
		sum += r.Val()
	}
	dbsize := c.DBSize(ctx).Val()
	grow := after - before
	fmt.Printf("| %s | %d | %d | %.1f | %d | %.1f |\n", name, dbsize, grow, float64(grow)/float64(n), sum, float64(sum)/float64(n))
}

func usedMemory(ctx context.Context, c *redis.Client) int64 {
	s, err := c.Info(ctx, "memory").Result()
	if err != nil {
		fail(err.Error())
	}
	for _, line := range strings.Split(s, "\r\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	fail("no used_memory")
	return 0
}

func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fail(err.Error())
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "fencememory:", msg)
	os.Exit(1)
}
