package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/coordkit/coordination/internal/fencingcore"
)

// fencingArgs are the acquire arguments after the owner token and the TTL,
// as the library sends them for a non-blocking acquisition without a holder
// (this checkout's fencing_acquire.lua); scripts before it ignore them.
var fencingArgs = []any{}

// fencingMain counts instructions per call (collected inside
// processCommand) of the plain lock's acquire (SET NX GET PX, a command)
// and release (lock_release.lua), and of the fencing lock's acquire and
// release scripts in oldDir and in this checkout: each pair, then each half
// alone on fresh keys (a release's lease taken before counting starts).
// Then MEMORY USAGE of a held lease of each layout, 40-byte key names.
func fencingMain(ctx context.Context, c *redis.Client, pid, dir string, n int, oldDir string) {
	lockRel := load(ctx, c, newScript("lock_release"))
	noop := load(ctx, c, "return 1")
	// shared: the acquire script takes the slot's shared counter hash as
	// KEYS[3] (the layout of issue 24; earlier scripts take two keys).
	type side struct {
		name, acq, rel string
		shared         bool
	}
	oldAcq, newAcq := readFile(filepath.Join(oldDir, "fencing_acquire.lua")), newScript("fencing_acquire")
	sides := []side{
		{"old", load(ctx, c, oldAcq), load(ctx, c, readFile(filepath.Join(oldDir, "fencing_release.lua"))), strings.Contains(oldAcq, "KEYS[3]")},
		{"new", load(ctx, c, newAcq), load(ctx, c, newScript("fencing_release")), strings.Contains(newAcq, "KEYS[3]")},
	}
	const ttl = "60000"
	tok := token()
	lockKey := func(i int) string { return fmt.Sprintf("lk:%d", i) }
	lease := func(s string, i int) string { return fmt.Sprintf("{%s:f:%d}:lease", s, i) }
	fence := func(s string, i int) string { return fmt.Sprintf("{%s:f:%d}:fence", s, i) }
	lockAcq := func(i int) error {
		return ignoreNil(c.Do(ctx, "set", lockKey(i), tok, "nx", "get", "px", ttl).Err())
	}
	lockRelease := func(i int) error { return c.EvalSha(ctx, lockRel, []string{lockKey(i)}, tok).Err() }
	acqKeys := func(s side, l, f string) []string {
		if s.shared {
			return []string{l, f, fencingcore.SharedKeyOf("", f)}
		}
		return []string{l, f}
	}
	fAcq := func(s side, i int) error {
		return c.EvalSha(ctx, s.acq, acqKeys(s, lease(s.name, i), fence(s.name, i)), append([]any{tok, ttl}, fencingArgs...)...).Err()
	}
	fRel := func(s side, i int) error { return c.EvalSha(ctx, s.rel, []string{lease(s.name, i)}, tok).Err() }

	type fcase struct {
		name string
		prep func(i int) error // before counting starts, for each run
		run  func(i int) error
	}
	cases := []fcase{
		{name: "no-op EVALSHA (return 1)", run: func(i int) error { return c.EvalSha(ctx, noop, []string{lockKey(0)}).Err() }},
		{name: "lock pair: SET NX GET PX + lock_release", run: func(int) error {
			if err := lockAcq(0); err != nil {
				return err
			}
			return lockRelease(0)
		}},
		{name: "lock acquire: SET NX GET PX", run: lockAcq},
		{name: "lock release: lock_release", prep: lockAcq, run: lockRelease},
	}
	// lock_acquire (a blocked waiter's attempt; the library's first attempt
	// is the SET above): when oldDir holds an earlier lock_acquire.lua, both,
	// on a free key (grant) and on a key another token holds (refusal).
	if old := readFileIfAny(filepath.Join(oldDir, "lock_acquire.lua")); old != "" {
		other := token()
		for _, la := range []struct{ name, sha string }{{"old", load(ctx, c, old)}, {"new", load(ctx, c, newScript("lock_acquire"))}} {
			key := func(i int) string { return fmt.Sprintf("la:%s:%d", la.name, i) }
			cases = append(cases,
				fcase{name: la.name + " lock_acquire grant (free key)", run: func(i int) error {
					return c.EvalSha(ctx, la.sha, []string{key(i)}, tok, ttl).Err()
				}},
				fcase{name: la.name + " lock_acquire refusal (held, marked)", prep: func(i int) error {
					return c.Set(ctx, key(i), other+"+", time.Hour).Err()
				}, run: func(i int) error {
					return c.EvalSha(ctx, la.sha, []string{key(i)}, tok, ttl).Err()
				}})
		}
	}
	// lease_acquire (a FieldSet's named lease in a hash field), likewise
	// when oldDir holds an earlier lease_acquire.lua.
	if old := readFileIfAny(filepath.Join(oldDir, "lease_acquire.lua")); old != "" {
		other := token()
		for _, la := range []struct{ name, sha string }{{"old", load(ctx, c, old)}, {"new", load(ctx, c, newScript("lease_acquire"))}} {
			key := func(i int) string { return fmt.Sprintf("fl:%s:%d", la.name, i) }
			cases = append(cases,
				fcase{name: la.name + " lease_acquire grant (free field)", run: func(i int) error {
					return c.EvalSha(ctx, la.sha, []string{key(i)}, "f", tok, ttl).Err()
				}},
				fcase{name: la.name + " lease_acquire refusal (field held)", prep: func(i int) error {
					if err := c.HSet(ctx, key(i), "f", other).Err(); err != nil {
						return err
					}
					return c.HPExpire(ctx, key(i), time.Hour, "f").Err()
				}, run: func(i int) error {
					return c.EvalSha(ctx, la.sha, []string{key(i)}, "f", tok, ttl).Err()
				}})
		}
	}
	for _, s := range sides {
		cases = append(cases,
			fcase{name: s.name + " fencing pair", run: func(int) error {
				if err := fAcq(s, 0); err != nil {
					return err
				}
				return fRel(s, 0)
			}},
			fcase{name: s.name + " fencing acquire", run: func(i int) error { return fAcq(s, i) }},
			fcase{name: s.name + " fencing release", prep: func(i int) error { return fAcq(s, i) }, run: func(i int) error { return fRel(s, i) }},
		)
	}
	fmt.Printf("| case | Ir/call (processCommand) |\n|---|---|\n")
	for ci, cs := range cases {
		base := (ci + 1) * 10_000_000 // fresh keys for every case
		for j := range 10 {
			if cs.prep != nil {
				if err := cs.prep(base - 1 - j); err != nil {
					fail(cs.name + ": " + err.Error())
				}
			}
			if err := cs.run(base - 1 - j); err != nil {
				fail(cs.name + ": " + err.Error())
			}
		}
		if cs.prep != nil {
			for i := range n {
				if err := cs.prep(base + i); err != nil {
					fail(cs.name + ": " + err.Error())
				}
			}
		}
		control("-z", pid)
		for i := range n {
			if err := cs.run(base + i); err != nil {
				fail(cs.name + ": " + err.Error())
			}
		}
		before, _ := filepath.Glob(filepath.Join(dir, "cg.out.*"))
		control("-d", pid)
		fmt.Printf("| %s | %d |\n", cs.name, totalIr(dir, len(before))/int64(n))
	}

	name := func(kind string) string {
		k := "mem:" + kind + ":"
		return k + strings.Repeat("x", 40-len(k))
	}
	usage := func(key string) int64 {
		v, err := c.MemoryUsage(ctx, key, 0).Result()
		if err != nil {
			fail(key + ": " + err.Error())
		}
		return v
	}
	fmt.Printf("\n| idle key (40-byte name, 22-byte owner token) | MEMORY USAGE B |\n|---|---|\n")
	lk := name("lock")
	if err := ignoreNil(c.Do(ctx, "set", lk, tok, "nx", "get", "px", ttl).Err()); err != nil {
		fail(err.Error())
	}
	fmt.Printf("| lock | %d |\n", usage(lk))
	for _, s := range sides {
		l, f := name("{"+s.name+"}lease"), name("{"+s.name+"}fence")
		if err := c.EvalSha(ctx, s.acq, acqKeys(s, l, f), append([]any{tok, ttl}, fencingArgs...)...).Err(); err != nil {
			fail(err.Error())
		}
		if s.shared {
			h := fencingcore.SharedKeyOf("", f)
			fmt.Printf("| %s fencing lease | %d |\n| %s shared counter hash (this name's field alone) | %d |\n", s.name, usage(l), s.name, usage(h))
			continue
		}
		fmt.Printf("| %s fencing lease | %d |\n| %s fencing counter | %d |\n", s.name, usage(l), s.name, usage(f))
	}
}

// token returns an owner token as the library makes them: 16 random bytes
// in unpadded base64url (22 bytes).
func token() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// readFileIfAny returns the file's text, "" when it does not exist.
func readFileIfAny(name string) string {
	b, err := os.ReadFile(name)
	if err != nil {
		return ""
	}
	return string(b)
}

func ignoreNil(err error) error {
	if err == redis.Nil {
		return nil
	}
	return err
}
