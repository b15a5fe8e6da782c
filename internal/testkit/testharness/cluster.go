package testharness

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Cluster is a local Redis Cluster on 127.0.0.1: 3 primaries, each with
// one replica (6 nodes), unless made by [NewCluster] with other sizes.
type Cluster struct {
	Flavor   string
	Nodes    []*Server
	replicas int // replicas in all
}

// Addrs returns the nodes' addresses.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.Addr
	}
	return out
}

// Options returns go-redis cluster options for the cluster.
func (c *Cluster) Options() *redis.ClusterOptions {
	return &redis.ClusterOptions{Addrs: c.Addrs(), DialTimeout: time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second}
}

// Close stops every node of a cluster made by [NewCluster].
func (c *Cluster) Close() { c.close() }

func (c *Cluster) close() {
	for _, n := range c.Nodes {
		n.close()
	}
}

// startCluster starts 6 nodes of flavor, creates the cluster with the
// flavor's CLI (--cluster-replicas 1) and waits until every node reports
// cluster_state:ok and sees all 3 replicas attached (cluster_state:ok alone
// is not enough; see SERVERS.md).
func startCluster(flavor string) (*Cluster, error) { return NewCluster(flavor, 3, 1) }

// NewCluster starts a cluster of primaries primaries, each with replicas
// replicas, of flavor, and waits until it is ready (as startCluster);
// stop it with Close. For measurements by cluster size (bench/); tests
// use [StartCluster].
func NewCluster(flavor string, primaries, replicas int) (*Cluster, error) {
	c := &Cluster{Flavor: flavor, replicas: primaries * replicas}
	for range primaries * (1 + replicas) {
		n, err := startServer(flavor, true, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "2000")
		if err != nil {
			c.close()
			return nil, err
		}
		c.Nodes = append(c.Nodes, n)
	}
	args := []string{"--cluster", "create"}
	args = append(args, c.Addrs()...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	if out, err := exec.Command(c.Nodes[0].cli, args...).CombinedOutput(); err != nil {
		c.close()
		return nil, fmt.Errorf("testharness: cluster create: %v: %s", err, out)
	}
	if err := c.waitReady(60 * time.Second); err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) waitReady(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	var why string
	for time.Now().Before(deadline) {
		if why = c.notReady(); why == "" {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("testharness: cluster not ready after %v: %s", limit, why)
}

func (c *Cluster) notReady() string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, n := range c.Nodes {
		cl := redis.NewClient(&redis.Options{Addr: n.Addr, MaxRetries: -1})
		info, err := cl.ClusterInfo(ctx).Result()
		if err != nil {
			cl.Close()
			return err.Error()
		}
		if !strings.Contains(info, "cluster_state:ok") {
			cl.Close()
			var state []string
			for _, l := range strings.Split(info, "\n") {
				if strings.HasPrefix(l, "cluster_state:") || strings.HasPrefix(l, "cluster_slots_") || strings.HasPrefix(l, "cluster_known_nodes:") {
					state = append(state, strings.TrimSpace(l))
				}
			}
			return n.Addr + " cluster_state not ok (" + strings.Join(state, " ") + "); its log ends: " + n.logTail()
		}
		nodes, err := cl.ClusterNodes(ctx).Result()
		cl.Close()
		if err != nil {
			return err.Error()
		}
		replicas := 0
		for _, line := range strings.Split(strings.TrimSpace(nodes), "\n") {
			f := strings.Fields(line)
			if len(f) < 4 {
				continue
			}
			flags := f[2]
			if strings.Contains(flags, "handshake") || strings.Contains(flags, "fail") || strings.Contains(flags, "noaddr") {
				return n.Addr + " sees a node " + flags
			}
			if strings.Contains(flags, "slave") && f[3] != "-" {
				replicas++
			}
		}
		if replicas != c.replicas {
			return fmt.Sprintf("%s sees %d replicas", n.Addr, replicas)
		}
	}
	return ""
}
