package testharness

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
)

// Counter counts the commands a go-redis client sends, through a go-redis
// hook, leaving out those that set up a new connection (see connSetup). It
// is how tests prove one round trip per operation.
type Counter struct {
	mu    sync.Mutex
	names []string
}

// CountCommands installs a counting hook on c and returns its counter.
func CountCommands(c redis.UniversalClient) *Counter {
	k := &Counter{}
	c.AddHook(k)
	return k
}

// Reset forgets what was counted.
func (k *Counter) Reset() {
	k.mu.Lock()
	k.names = nil
	k.mu.Unlock()
}

// Count returns the number of commands sent since the last Reset.
func (k *Counter) Count() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.names)
}

// Names returns the upper-case names of the commands sent since the last
// Reset, in order.
func (k *Counter) Names() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.names...)
}

// ExpectOne resets the counter, runs op and fails t unless op returned nil
// having sent exactly one command, an EVALSHA: the proof that an operation
// is one round trip once its script is cached. what names the operation in
// the failure message.
func (k *Counter) ExpectOne(t testing.TB, what string, op func() error) {
	t.Helper()
	k.Reset()
	if err := op(); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if got := k.Names(); !slices.Equal(got, []string{"EVALSHA"}) {
		t.Fatalf("%s sent %v, want one EVALSHA", what, got)
	}
}

func (k *Counter) add(cmds ...redis.Cmder) {
	k.mu.Lock()
	for _, c := range cmds {
		if connSetup(c) {
			continue
		}
		k.names = append(k.names, strings.ToUpper(c.Name()))
	}
	k.mu.Unlock()
}

// connSetup reports whether c is one of the commands go-redis sends to set
// up a new connection (HELLO, AUTH, SELECT, READONLY, CLIENT SETINFO ...),
// which pass through the client's hooks too. They are not part of any
// operation (the library never sends them) and are not counted: a
// connection opened during an operation (a pooled one closed by a fault, a
// second one while a background cleanup holds the first) would otherwise
// make a one-command operation look like three.
func connSetup(c redis.Cmder) bool {
	switch strings.ToLower(c.Name()) {
	case "hello", "auth", "select", "readonly":
		return true
	case "client":
		if args := c.Args(); len(args) > 1 {
			sub, _ := args[1].(string)
			switch strings.ToLower(sub) {
			case "setinfo", "setname", "tracking", "maint_notifications":
				return true
			}
		}
	}
	return false
}

// DialHook implements redis.Hook.
func (k *Counter) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook implements redis.Hook.
func (k *Counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		k.add(cmd)
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook implements redis.Hook.
func (k *Counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		k.add(cmds...)
		return next(ctx, cmds)
	}
}

var _ redis.Hook = (*Counter)(nil)

// Channel is the Pub/Sub channel on which a release of the prefixed key
// full is announced: "coordination:" + full, as docs/coordinator.md
// documents (written here, not taken from the engine, so that a test
// using it also pins the documented name).
func Channel(full string) string { return "coordination:" + full }

// ShardChannel is the sharded Pub/Sub channel on which a release of the
// prefixed key full is announced where the server has sharded Pub/Sub, in
// full's Cluster slot: Channel(full) when full has a hash tag, full
// followed by itself in braces when it holds no brace, and "" otherwise
// (braces that form no hash tag: the release uses classic Pub/Sub). Written
// here, not taken from the engine, so that a test using it also pins the
// documented name.
func ShardChannel(full string) string {
	if i := strings.IndexByte(full, '{'); i >= 0 {
		if j := strings.IndexByte(full[i+1:], '}'); j > 0 {
			return Channel(full)
		}
		return ""
	}
	if full == "" || strings.ContainsRune(full, '}') {
		return ""
	}
	return Channel(full + "{" + full + "}")
}

// Publish announces a release of the prefixed key full as the scripts do:
// SPUBLISH on its shard channel, or, when the server refuses it or full has
// none, PUBLISH on its classic channel.
func Publish(ctx context.Context, c redis.UniversalClient, full, msg string) error {
	if sh := ShardChannel(full); sh != "" {
		err := c.SPublish(ctx, sh, msg).Err()
		var re redis.Error
		if !errors.As(err, &re) {
			return err
		}
	}
	return c.Publish(ctx, Channel(full), msg).Err()
}

// Subscribers returns the number of subscriptions to the release channels
// of the prefixed key full: PUBSUB NUMSUB of its classic channel plus, where
// the server has sharded Pub/Sub, PUBSUB SHARDNUMSUB of its shard channel
// (on a Cluster client, asked of the primary that owns its slot).
func Subscribers(ctx context.Context, c redis.UniversalClient, full string) (int64, error) {
	ch := Channel(full)
	n, err := c.PubSubNumSub(ctx, ch).Result()
	if err != nil {
		return 0, err
	}
	total := n[ch]
	sh := ShardChannel(full)
	if sh == "" {
		return total, nil
	}
	var node redis.UniversalClient = c
	if cc, ok := c.(*redis.ClusterClient); ok {
		m, err := cc.MasterForKey(ctx, sh)
		if err != nil {
			return 0, err
		}
		node = m
	}
	s, err := node.PubSubShardNumSub(ctx, sh).Result()
	var re redis.Error
	if errors.As(err, &re) {
		return total, nil // no sharded Pub/Sub (miniredis)
	}
	if err != nil {
		return 0, err
	}
	return total + s[sh], nil
}
