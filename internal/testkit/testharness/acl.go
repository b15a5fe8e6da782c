package testharness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// ACLFlavor is the backend whose behavioural tests run as the
// least-privilege user of docs/acl.md ("Least privilege"): on it,
// [Backend.Client] (and so [Backend.Coordinator]) connects as that user,
// created on the shared server with exactly the docs' ACL line, the key
// pattern and channel pattern given for the test prefix "t:". Tests that
// need other commands (CONFIG, CLIENT KILL, DEBUG, FLUSHALL, a key outside
// the prefix ...) use [Backend.Admin].
const ACLFlavor = "redis8"

// ACLUser and ACLPassword are the least-privilege user's credentials on
// the [ACLFlavor] backend.
const (
	ACLUser     = "coord"
	ACLPassword = "coord-least-privilege"
)

// ACLPrefix is what docs/acl.md's <prefix> placeholder stands for in the
// tests: every test key starts with it ([Backend.Prefix]).
const ACLPrefix = "t:"

// ACLLine returns docs/acl.md's ACL SETUSER line for the library (the
// first of its two lines that start so), as written.
func ACLLine() (string, error) {
	lines, err := aclLines()
	if err != nil {
		return "", err
	}
	return lines[0], nil
}

// aclLines returns docs/acl.md's two lines that start with "ACL SETUSER ":
// the library's, then what coordctl's inspect, repair and demo add.
func aclLines() ([]string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return nil, errors.New("testharness: cannot locate docs/acl.md")
	}
	readme, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "..", "docs", "acl.md"))
	if err != nil {
		return nil, err
	}
	var found []string
	for _, line := range strings.Split(string(readme), "\n") {
		if strings.HasPrefix(line, "ACL SETUSER ") {
			found = append(found, line)
		}
	}
	if len(found) != 2 {
		return nil, fmt.Errorf("testharness: docs/acl.md has %d lines starting with \"ACL SETUSER \", want 2 (the library's, coordctl's)", len(found))
	}
	return found, nil
}

// ACLRules returns the rules of docs/acl.md's ACL line (after the user
// name) with <password> and <prefix> replaced for the tests.
func ACLRules() ([]string, error) {
	line, err := ACLLine()
	if err != nil {
		return nil, err
	}
	f := strings.Fields(line)
	if len(f) < 4 {
		return nil, fmt.Errorf("testharness: docs/acl.md's ACL line is too short: %q", line)
	}
	r := strings.NewReplacer("<password>", ACLPassword, "<prefix>", ACLPrefix)
	rules := make([]string, 0, len(f)-3)
	for _, x := range f[3:] {
		rules = append(rules, r.Replace(x))
	}
	return rules, nil
}

// CoordctlUser and CoordctlPassword are, on the [ACLFlavor] backend, a
// user with both of docs/acl.md's lines (the library's, then coordctl's
// additions), for keys under [ACLPrefix] and under coordctl demo's default
// prefix "coordctl-demo:": coordctl's tests connect as it there.
const (
	CoordctlUser     = "coordctl"
	CoordctlPassword = "coordctl-least-privilege"
)

// createACLUser creates [ACLUser] on s with docs/acl.md's rules, and
// [CoordctlUser] with them and coordctl's.
func createACLUser(s *Server) error {
	rules, err := ACLRules()
	if err != nil {
		return err
	}
	lines, err := aclLines()
	if err != nil {
		return err
	}
	extra := strings.Fields(lines[1])[3:]
	c := redis.NewClient(s.Options())
	defer c.Close()
	for _, u := range []struct {
		name  string
		rules []string
	}{
		{ACLUser, rules},
		{CoordctlUser, append(append(append([]string{}, rules...), extra...),
			">"+CoordctlPassword, "~coordctl-demo:*", "&coordination:coordctl-demo:*")},
	} {
		args := []any{"ACL", "SETUSER", u.name, "reset"}
		for _, r := range u.rules {
			args = append(args, r)
		}
		if err := c.Do(context.Background(), args...).Err(); err != nil {
			return fmt.Errorf("testharness: creating the least-privilege user %s on %s: %w", u.name, s.Flavor, err)
		}
	}
	s.aclUser = true
	return nil
}

// AdminOf returns a new client to the same server (or cluster, or Sentinel
// deployment for a failover client of [Backend.Client]) as c that
// connects as the default user, closed when the test ends: for a test
// helper that gets only the library's client and must send what the
// least-privilege user may not (SCRIPT LOAD, CONFIG ...).
func AdminOf(t testing.TB, c redis.UniversalClient) redis.UniversalClient {
	t.Helper()
	var admin redis.UniversalClient
	switch v := c.(type) {
	case *redis.Client:
		if fo, ok := failoverClients.Load(v); ok {
			o := *fo.(*redis.FailoverOptions)
			admin = redis.NewFailoverClient(&redis.FailoverOptions{MasterName: o.MasterName, SentinelAddrs: o.SentinelAddrs,
				DialTimeout: o.DialTimeout, ReadTimeout: o.ReadTimeout, WriteTimeout: o.WriteTimeout, Protocol: o.Protocol})
			break
		}
		o := v.Options()
		admin = redis.NewClient(&redis.Options{Addr: o.Addr, DialTimeout: o.DialTimeout, ReadTimeout: o.ReadTimeout,
			WriteTimeout: o.WriteTimeout, Protocol: o.Protocol})
	case *redis.ClusterClient:
		o := v.Options()
		admin = redis.NewClusterClient(&redis.ClusterOptions{Addrs: o.Addrs, DialTimeout: o.DialTimeout,
			ReadTimeout: o.ReadTimeout, WriteTimeout: o.WriteTimeout, Protocol: o.Protocol})
	default:
		t.Fatalf("testharness.AdminOf: unsupported client %T", c)
	}
	t.Cleanup(func() { _ = admin.Close() })
	return admin
}

// Connect makes c open a connection to every server it talks to (every
// primary of a cluster) with a PING, so that a later command counted with
// [CountCommands] is not preceded by go-redis' connection handshake (after
// scripts were loaded through another client, [AdminOf]).
func Connect(t testing.TB, c redis.UniversalClient) {
	t.Helper()
	ctx := context.Background()
	var err error
	if cc, ok := c.(*redis.ClusterClient); ok {
		err = cc.ForEachShard(ctx, func(ctx context.Context, n *redis.Client) error { return n.Ping(ctx).Err() })
	} else {
		err = c.Ping(ctx).Err()
	}
	if err != nil {
		t.Fatalf("testharness.Connect: %v", err)
	}
}
