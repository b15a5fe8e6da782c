package testharness

import (
	"context"
	"net"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/coordkit/coordination/internal/testkit/faultproxy"
)

// Proxied returns a fault proxy in front of the server that holds key (a
// prefixed key, as [Backend.Key] returns) and a new client that reaches it
// through the proxy, both closed when the test ends; modify adjusts the
// client's options as for [Backend.Client]. On miniredis and a standalone
// server the proxy fronts the server; on the Sentinel deployment it fronts
// the primary, and the client is a failover client whose Dialer sends the
// primary's address to the proxy (the Sentinels' go straight); on the
// cluster it fronts the primary
// that owns key's slot, and the client is a cluster client whose slot map
// (ClusterSlots) sends every slot there: use it for key (and keys of its
// slot) only. MaxRetries -1 also turns the cluster client's redirects off
// (MaxRedirects -1): it re-sends a timed-out command otherwise.
func (b *Backend) Proxied(t testing.TB, key string, modify ...func(*redis.Options)) (*faultproxy.Proxy, redis.UniversalClient) {
	t.Helper()
	if b.LeastPrivilege() {
		modify = append([]func(*redis.Options){func(o *redis.Options) { o.Username, o.Password = ACLUser, ACLPassword }}, modify...)
	}
	var c redis.UniversalClient
	switch b.Kind {
	case Embedded, Standalone:
		addr := ""
		o := &redis.Options{}
		if b.Kind == Embedded {
			addr = b.Mini.Addr()
		} else {
			addr, o = b.Server.Addr, b.Server.Options()
		}
		p := faultproxy.Start(t, addr)
		o.Addr = p.Addr()
		for _, m := range modify {
			m(o)
		}
		c = redis.NewClient(o)
		t.Cleanup(func() { _ = c.Close() })
		return p, c
	case SentinelKind:
		primary, err := b.Sentinel.MasterAddr(context.Background())
		if err != nil {
			t.Fatalf("testharness: the Sentinel deployment's primary: %v", err)
		}
		p := faultproxy.Start(t, primary)
		var d net.Dialer
		redirect := func(o *redis.Options) {
			o.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
				if addr == primary {
					addr = p.Addr()
				}
				return d.DialContext(ctx, network, addr)
			}
		}
		return p, b.client(t, append(modify, redirect)...)
	}
	admin := b.Admin(t).(*redis.ClusterClient)
	node, err := admin.MasterForKey(context.Background(), key)
	if err != nil {
		t.Fatalf("testharness: the primary of %q: %v", key, err)
	}
	p := faultproxy.Start(t, node.Options().Addr)
	co := b.Cluster.Options()
	o := &redis.Options{DialTimeout: co.DialTimeout, ReadTimeout: co.ReadTimeout, WriteTimeout: co.WriteTimeout,
		MaxRetries: co.MaxRetries}
	for _, m := range modify {
		m(o)
	}
	co.Addrs = []string{p.Addr()}
	co.DialTimeout, co.ReadTimeout, co.WriteTimeout = o.DialTimeout, o.ReadTimeout, o.WriteTimeout
	co.MaxRetries, co.Username, co.Password = o.MaxRetries, o.Username, o.Password
	co.ContextTimeoutEnabled = o.ContextTimeoutEnabled
	if o.MaxRetries < 0 { // no re-send at all: no redirect either
		co.MaxRedirects = -1
	}
	co.ClusterSlots = func(context.Context) ([]redis.ClusterSlot, error) {
		return []redis.ClusterSlot{{Start: 0, End: 16383, Nodes: []redis.ClusterNode{{Addr: p.Addr()}}}}, nil
	}
	c = redis.NewClusterClient(co)
	t.Cleanup(func() { _ = c.Close() })
	return p, c
}
