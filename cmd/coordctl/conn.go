package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// connFlags are the connection flags shared by every subcommand.
type connFlags struct {
	url     string
	cluster string
	prefix  string
}

func (c *connFlags) register(fs *flag.FlagSet) {
	// The environment is read at connect time, not shown as a default: a
	// URL may carry a password, and -h must not print it.
	fs.StringVar(&c.url, "redis", "", "server URL, redis://[user:pass@]host:port/db (default $COORD_REDIS_URL)")
	fs.StringVar(&c.cluster, "cluster", "", "comma-separated Redis Cluster node addresses host:port, instead of --redis (default $COORD_CLUSTER_ADDRS)")
	fs.StringVar(&c.prefix, "prefix", "", "key prefix prepended to every key")
}

// check reports conflicting connection flags (a usage error).
func (c *connFlags) check() error {
	if c.url != "" && c.cluster != "" {
		return fmt.Errorf("give --redis or --cluster, not both")
	}
	return nil
}

// connect returns a client for the flags. When neither --redis nor
// --cluster is given and embedded is true, it starts an in-process
// miniredis whose clock follows the wall clock; stop releases it.
func (c *connFlags) connect(embedded bool) (client redis.UniversalClient, desc string, stop func(), err error) {
	if c.url == "" && c.cluster == "" {
		c.url, c.cluster = os.Getenv("COORD_REDIS_URL"), os.Getenv("COORD_CLUSTER_ADDRS")
		if c.url != "" && c.cluster != "" {
			c.cluster = ""
		}
	}
	switch {
	case c.cluster != "":
		cl := redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(c.cluster, ",")})
		return cl, "Redis Cluster", func() { _ = cl.Close() }, ping(cl)
	case c.url != "":
		opt, err := redis.ParseURL(c.url)
		if err != nil {
			return nil, "", nil, fmt.Errorf("--redis: %w (want redis://[user:pass@]host:port/db or rediss://...)", err)
		}
		cl := redis.NewClient(opt)
		return cl, "server " + opt.Addr, func() { _ = cl.Close() }, ping(cl)
	case embedded:
		m, cl, stop, err := startEmbedded()
		if err != nil {
			return nil, "", nil, err
		}
		_ = m
		return cl, "embedded miniredis (use --redis redis://127.0.0.1:6379/0 for a real server)", stop, nil
	default:
		return nil, "", nil, fmt.Errorf("no server: give --redis URL (or set COORD_REDIS_URL)")
	}
}

func ping(c redis.UniversalClient) error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		_ = c.Close()
		return fmt.Errorf("cannot reach the server: %w", err)
	}
	return nil
}

// startEmbedded starts a miniredis whose TIME and TTLs follow the wall
// clock (miniredis otherwise never expires keys on its own).
func startEmbedded() (*miniredis.Miniredis, redis.UniversalClient, func(), error) {
	m := miniredis.NewMiniRedis()
	if err := m.Start(); err != nil {
		return nil, nil, nil, err
	}
	m.SetTime(time.Now())
	m.ClockTTL(true)
	done := make(chan struct{})
	ticked := make(chan struct{})
	go func() {
		defer close(ticked)
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				m.SetTime(now)
			}
		}
	}()
	cl := redis.NewClient(&redis.Options{Addr: m.Addr()})
	return m, cl, func() {
		_ = cl.Close()
		close(done)
		<-ticked
		m.Close()
	}, nil
}

// quietLogger discards go-redis' own log lines (dial retries and the
// like): coordctl reports connection errors itself, once.
type quietLogger struct{}

// Printf implements go-redis' logger interface and discards the line.
func (quietLogger) Printf(context.Context, string, ...any) {}
