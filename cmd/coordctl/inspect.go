package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/coordkit/coordination/internal/fencingcore"
	"github.com/coordkit/coordination/internal/layout"
)

func init() {
	register(command{
		name:  "inspect",
		usage: "inspect KEY [--json] | inspect --scan PATTERN  show what a key holds, decoded",
		run:   runInspect,
	})
}

func runInspect(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("inspect", stdout, stderr, `usage: coordctl inspect KEY [--json]
       coordctl inspect --scan PATTERN [--limit 1000] [--json]

Reads KEY (after --prefix) and prints what it holds, decoded by the layouts the
packages document: a lock's owner (truncated token) and TTL; a fencing lease's
owner, holder, token, term start and fence counter; a fence counter (in the
shared counter hash of its slot, read by its counter key) and that hash; hash-field leases per field; rwlease
readers and writer; semaphore capacity and permits with time left; latch
generation, count and deadline; an idempotency claim's state (pending, completed,
abandoned, failed), fencing token, fingerprint and result; a limiter's algorithm,
remaining permits and next refill or reset; a deny list's size. It only reads.
Unknown or corrupt layouts are said plainly.
--scan lists the keys matching PATTERN (a SCAN glob, after --prefix) with their
kind, on every primary of a Cluster. A KEY in double quotes is read as a Go
string literal, as --scan shows names with control characters (a FIFO lock's
queue keys hold a NUL byte).

Exit status: 0 decoded; 1 no such key, or a layout that is unknown or corrupt (--scan:
no key matched); 2 bad usage; 3 the server cannot be reached.`, `coordctl inspect --redis redis://127.0.0.1:6379/0 '{nightly}:lock'
coordctl inspect --prefix myapp: --scan 'limits:*' --json`)
	asJSON := fs.Bool("json", false, "print JSON (one object; with --scan, one per line)")
	scan := fs.String("scan", "", "list the keys matching this SCAN glob with their kind, instead of one KEY")
	limit := fs.Int("limit", 1000, "with --scan: stop after this many keys")
	if code, ok := fs.parse(args); !ok {
		return code
	}
	switch {
	case *scan == "" && fs.NArg() != 1:
		return fs.usagef("give one KEY (or --scan PATTERN), e.g. coordctl inspect '{nightly}:lock'")
	case *scan != "" && fs.NArg() > 0:
		return fs.usagef("give KEY or --scan PATTERN, not both")
	case *scan == "" && fs.Arg(0) == "":
		return fs.usagef("KEY is empty; give the key's name (without the --prefix), e.g. coordctl inspect '{nightly}:lock'")
	case *limit < 1:
		return fs.usagef("--limit must be 1 or more, e.g. --limit 1000")
	}
	_, client, _, stop, code := fs.connectCoord()
	if stop == nil {
		return code
	}
	defer stop()
	ctx, stopSignals := notifySignals()
	defer stopSignals()
	prefix := fs.cf.prefix
	if *scan != "" {
		return inspectScan(ctx, client, prefix, *scan, *limit, *asJSON, stdout, stderr)
	}
	name := fs.Arg(0)
	if len(name) >= 2 && name[0] == '"' {
		// Go-quoted, as --scan shows a name with control characters (a
		// FIFO lock's queue keys hold a NUL byte, which no argument can).
		if u, err := strconv.Unquote(name); err == nil {
			name = u
		}
	}
	key := prefix + name
	s, err := fetch(ctx, client, prefix, key)
	if err != nil {
		return fail(stderr, fs.name, err)
	}
	s.Prefix = prefix
	r := decode(s)
	if r.Kind == layout.KindMissing {
		if *asJSON {
			b, _ := json.Marshal(r)
			fmt.Fprintln(stdout, string(b))
		}
		fmt.Fprintf(stderr, "coordctl inspect: no such key %q\n", r.Key)
		return exitRefused
	}
	if *asJSON {
		b, _ := json.Marshal(r)
		fmt.Fprintln(stdout, string(b))
	} else {
		fmt.Fprint(stdout, r.Text())
	}
	if r.Problem != "" {
		return exitRefused
	}
	return exitOK
}

func inspectScan(ctx context.Context, client redis.UniversalClient, prefix, pattern string, limit int, asJSON bool, stdout, stderr io.Writer) int {
	n := 0
	// Columns aligned over all the keys listed (a TTL may be long):
	// written when the listing ends.
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	each := func(ctx context.Context, node redis.UniversalClient) error {
		iter := node.Scan(ctx, 0, escapeGlob(prefix)+pattern, 500).Iterator()
		for n < limit && iter.Next(ctx) {
			key := iter.Val()
			s, err := fetch(ctx, client, prefix, key)
			if err != nil {
				return err
			}
			s.Prefix = prefix
			r := decode(s)
			n++
			if asJSON {
				b, _ := json.Marshal(r)
				fmt.Fprintln(stdout, string(b))
				continue
			}
			// One line per key, whatever the key or its problem hold:
			// control characters escaped (layout.OneLine; the key through
			// shown), and a key of no layout not called corrupt.
			flag := ""
			if r.Problem != "" && r.Kind != layout.KindMissing {
				flag = "  " + r.ProblemLabel() + layout.OneLine(r.Problem)
			}
			ttl := ttlShort(r.TTL)
			if r.FieldTTLs != "" {
				ttl = "per-field"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s%s\n", r.Kind, ttl, shown(key), flag)
		}
		return iter.Err()
	}
	// One node after the other (ForEachMaster runs them at once): the
	// output stays in order and --limit counts once.
	nodes := []redis.UniversalClient{client}
	var err error
	if cc, ok := client.(*redis.ClusterClient); ok {
		var mu sync.Mutex
		nodes = nil
		err = cc.ForEachMaster(ctx, func(_ context.Context, c *redis.Client) error {
			mu.Lock()
			defer mu.Unlock()
			nodes = append(nodes, c)
			return nil
		})
	}
	for _, node := range nodes {
		if err != nil || n >= limit {
			break
		}
		err = each(ctx, node)
	}
	if ferr := tw.Flush(); err == nil {
		err = ferr
	}
	if err != nil {
		return fail(stderr, "inspect", err)
	}
	if n == 0 {
		fmt.Fprintf(stderr, "coordctl inspect: no key matches %q\n", prefix+pattern)
		return exitRefused
	}
	if n >= limit {
		fmt.Fprintf(stderr, "coordctl inspect: stopped after --limit %d keys\n", limit)
	}
	return exitOK
}

func ttlShort(ms int64) string {
	if ms == -1 {
		return "no-ttl"
	}
	if t := layout.TTLText(ms); t != "-" {
		return "ttl=" + t
	}
	return "-"
}

// maxValue bounds what fetch reads of a value (a claim's result can be
// large).
const maxValue = 64 << 10

// maxMembers bounds what fetch reads of a hash or sorted set.
const maxMembers = 1000

// tagOf returns key up to its {hash tag} and the ':' after it
// ("p{job}:" of "p{job}:lock"), and whether it has one.
func tagOf(key string) (string, bool) {
	i := strings.IndexByte(key, '{')
	if i < 0 {
		return "", false
	}
	j := strings.IndexByte(key[i+1:], '}')
	end := i + 1 + j + 2 // through "}:"
	if j <= 0 || end > len(key) || key[end-1] != ':' {
		return "", false
	}
	return key[:end], true
}

// fetch reads a snapshot of key (already prefixed): its type, TTL and
// contents (bounded by maxValue and maxMembers), the server's time, and
// for a fencing lease or counter the key next to it.
func fetch(ctx context.Context, c redis.UniversalClient, prefix, key string) (*layout.Snapshot, error) {
	s, err := fetchOne(ctx, c, key)
	if err != nil {
		return nil, err
	}
	if err := sharedCounter(ctx, c, prefix, s); err != nil {
		return nil, err
	}
	// The key's own hash tag, after the prefix (which may hold one too).
	rest, prefixed := strings.CutPrefix(key, prefix)
	tag, ok := tagOf(rest)
	if !ok {
		return s, nil
	}
	if prefixed {
		tag = prefix + tag
	}
	var sib []string
	switch {
	case s.Type == "hash" && (s.Hash["owner"] != "" || s.Hash["fence"] != "") && s.Hash["value"] == "":
		sib, s.SiblingRole = []string{tag + "fence"}, "fence counter"
	case s.Type == "string" && strings.HasSuffix(key, "}:fence"):
		// The names the packages and the README use, then any fencing
		// lease in the same hash tag (a bounded SCAN).
		sib, s.SiblingRole = []string{tag + "lock", tag + "lease", tag + "leader"}, "lease"
		s.SiblingTried = sib
	}
	for _, k := range sib {
		o, err := fetchOne(ctx, c, k)
		if err != nil {
			return nil, err
		}
		if s.SiblingRole == "fence counter" {
			if err := sharedCounter(ctx, c, prefix, o); err != nil {
				return nil, err
			}
		}
		if o.Type != "none" || k == sib[len(sib)-1] {
			s.Sibling = o
			break
		}
	}
	if s.SiblingRole == "lease" && s.Sibling != nil && s.Sibling.Type == "none" {
		k, err := findFencingLease(ctx, c, tag, key)
		if err != nil {
			return nil, err
		}
		if k != "" {
			if s.Sibling, err = fetchOne(ctx, c, k); err != nil {
				return nil, err
			}
		}
	}
	return s, nil
}

// sharedCounter reads, for s, a key that does not exist or holds the
// earlier fencing layout's tombstone "moved", the fence counter that the
// shared counter hash of its slot holds in the field named after it (the
// layout of issue 24): a missing key then reads as that counter (a string
// whose TTL is the hash's), and a tombstone learns the counter's value. A
// hash that is missing, lacks the field or is of another type leaves s
// as it is.
func sharedCounter(ctx context.Context, c redis.Cmdable, prefix string, s *layout.Snapshot) error {
	if s.Type != "none" && (s.Type != "string" || s.Str != "moved") {
		return nil
	}
	h := fencingcore.SharedKeyOf(prefix, s.Key)
	if h == "" {
		return nil
	}
	v, err := c.HGet(ctx, h, s.Key).Result()
	switch {
	case errors.Is(err, redis.Nil) || (err != nil && strings.HasPrefix(err.Error(), "WRONGTYPE")):
		return nil
	case err != nil:
		return err
	}
	s.Shared, s.SharedValue = h, v
	if s.Type == "none" {
		pttl, err := c.PTTL(ctx, h).Result()
		if err != nil {
			return err
		}
		s.Type, s.Str, s.StrLen, s.PTTL = "string", v, int64(len(v)), pttlMs(pttl)
	}
	return nil
}

// leaseScanBudget bounds the SCAN findFencingLease runs: this many calls
// of COUNT 1000 at most (about 10 000 keys looked at).
const leaseScanBudget = 10

// findFencingLease returns the first (in key order) fencing-lease hash
// (owner and fence fields) whose key starts with tag, other than
// counter, or "" when the bounded SCAN finds none. On a Cluster it scans
// the primary that holds tag's slot.
func findFencingLease(ctx context.Context, c redis.UniversalClient, tag, counter string) (string, error) {
	var node redis.Cmdable = c
	if cc, ok := c.(*redis.ClusterClient); ok {
		n, err := cc.MasterForKey(ctx, counter)
		if err != nil {
			return "", err
		}
		node = n
	}
	var found []string
	cursor := uint64(0)
	for range leaseScanBudget {
		keys, next, err := node.Scan(ctx, cursor, escapeGlob(tag)+"*", 1000).Result()
		if err != nil {
			return "", err
		}
		for _, k := range keys {
			if k == counter {
				continue
			}
			if t, err := node.Type(ctx, k).Result(); err != nil || t != "hash" {
				continue
			}
			if n, err := node.HExists(ctx, k, "owner").Result(); err != nil || !n {
				continue
			}
			if n, err := node.HExists(ctx, k, "fence").Result(); err != nil || !n {
				continue
			}
			found = append(found, k)
		}
		if cursor = next; cursor == 0 {
			break
		}
	}
	if len(found) == 0 {
		return "", nil
	}
	return slices.Min(found), nil
}

func fetchOne(ctx context.Context, c redis.Cmdable, key string) (*layout.Snapshot, error) {
	s := &layout.Snapshot{Key: key}
	var (
		typ  *redis.StatusCmd
		pttl *redis.DurationCmd
	)
	if _, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		typ = p.Type(ctx, key)
		pttl = p.PTTL(ctx, key)
		return nil
	}); err != nil {
		return nil, err
	}
	now, err := serverTime(ctx, c, key)
	if err != nil {
		return nil, err
	}
	s.Type, s.NowUs, s.NowMs = typ.Val(), now, now/1000
	s.PTTL = pttlMs(pttl.Val())
	switch s.Type {
	case "string":
		n, err := c.StrLen(ctx, key).Result()
		if err != nil {
			return nil, err
		}
		v, err := c.GetRange(ctx, key, 0, maxValue-1).Result()
		if err != nil {
			return nil, err
		}
		s.StrLen, s.Str = n, v
	case "hash":
		n, err := c.HLen(ctx, key).Result()
		if err != nil {
			return nil, err
		}
		s.HashLen = n
		if n <= maxMembers {
			s.Hash, err = c.HGetAll(ctx, key).Result()
		} else {
			var kvs []string
			kvs, _, err = c.HScan(ctx, key, 0, "*", maxMembers).Result()
			s.Hash = map[string]string{}
			for i := 0; i+1 < len(kvs); i += 2 {
				s.Hash[kvs[i]] = kvs[i+1]
			}
		}
		if err != nil {
			return nil, err
		}
		_, fencing := s.Hash["owner"]
		_, latch := s.Hash["gen"]
		if !fencing && !latch && len(s.Hash) > 0 {
			fields := make([]string, 0, len(s.Hash))
			for f := range s.Hash {
				fields = append(fields, f)
			}
			ttls, err := c.HPTTL(ctx, key, fields...).Result()
			if err == nil && len(ttls) == len(fields) {
				s.HashTTL = map[string]int64{}
				for i, f := range fields {
					s.HashTTL[f] = ttls[i]
				}
			}
			// An error (no HPTTL before Redis 7.4 / Valkey 9.0) leaves
			// HashTTL nil: decode says so.
		}
	case "zset":
		n, err := c.ZCard(ctx, key).Result()
		if err != nil {
			return nil, err
		}
		zs, err := c.ZRangeWithScores(ctx, key, 0, maxMembers-1).Result()
		if err != nil {
			return nil, err
		}
		s.ZCard = n
		for _, z := range zs {
			m, _ := z.Member.(string)
			s.ZSet = append(s.ZSet, layout.Member{Member: m, Score: z.Score})
		}
	case "set":
		n, err := c.SCard(ctx, key).Result()
		if err != nil {
			return nil, err
		}
		s.SCard = n
	}
	return s, nil
}

// serverTime returns the server's time in µs, from the node that holds
// key on a Cluster.
func serverTime(ctx context.Context, c redis.Cmdable, key string) (int64, error) {
	node := c
	if cc, ok := c.(*redis.ClusterClient); ok {
		n, err := cc.MasterForKey(ctx, key)
		if err != nil {
			return 0, err
		}
		node = n
	}
	t, err := node.Time(ctx).Result()
	if err != nil {
		return 0, err
	}
	return t.UnixMicro(), nil
}

// pttlMs converts go-redis' PTTL reply (-1 and -2 come back as
// nanoseconds) to milliseconds, -1 for no expiry, -2 for no key.
func pttlMs(d time.Duration) int64 {
	switch {
	case d == -1:
		return -1
	case d < 0:
		return -2
	}
	return d.Milliseconds()
}
