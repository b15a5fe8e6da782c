// Package lua holds every Lua script of the coordination primitives, one
// .lua file per script, embedded with go:embed.
//
// Each file begins with a comment block giving its KEYS (with their roles),
// ARGV (with units), the reply shape and the error codes it can return.
// The scripts share these conventions:
//
//   - Time comes from the server: redis.call('TIME') converted once to
//     integer milliseconds. The application's clock never enters a shared
//     decision.
//   - Arithmetic is integer milliseconds (or permits). 64-bit values that may
//     exceed 2^53 (fencing tokens) are handled as decimal strings and
//     returned as strings.
//   - A script validates everything it reads before writing anything. A
//     failure is an error reply whose text starts with a stable code
//     (COORD_BADCOUNTER, COORD_WRONGTYPE, COORD_CAPACITY_MISMATCH, ...);
//     package coordination maps those codes to typed errors.
//   - Scripts touch only the keys passed in KEYS, and are idempotent under a
//     re-send with the same owner token (go-redis re-sends a command after a
//     lost reply).
//   - Release notifications are best effort: scripts PUBLISH with
//     redis.pcall, so a user whose ACL forbids the channel still releases,
//     and its waiters fall back to expiry and periodic re-checks.
//
// Scripts run through [Script.Run], which sends EVALSHA and falls back to
// EVAL only when the server answers NOSCRIPT, so one operation is one round
// trip once the script is cached.
package lua

import (
	"context"
	"embed"
	"fmt"

	"github.com/redis/go-redis/v9"
)

//go:embed *.lua
var files embed.FS

// Script is one embedded Lua script. It is immutable and safe for concurrent
// use.
type Script struct {
	name   string
	source string
	rs     *redis.Script
}

// Name returns the script's file name without the .lua suffix, e.g.
// "lock_acquire".
func (s *Script) Name() string { return s.name }

// Source returns the script's Lua source.
func (s *Script) Source() string { return s.source }

// Hash returns the script's SHA1 as hex, the name EVALSHA uses.
func (s *Script) Hash() string { return s.rs.Hash() }

// Run sends EVALSHA and falls back to EVAL when the server does not have the
// script cached (NOSCRIPT). keys must already carry any key prefix.
func (s *Script) Run(ctx context.Context, c redis.Scripter, keys []string, args ...any) *redis.Cmd {
	return s.rs.Run(ctx, c, keys, args...)
}

// Load sends SCRIPT LOAD for the script (on a Cluster client, to every
// primary).
func (s *Script) Load(ctx context.Context, c redis.Scripter) error {
	return s.rs.Load(ctx, c).Err()
}

// All returns every embedded script, in file-name order.
func All() []*Script {
	entries, err := files.ReadDir(".")
	if err != nil {
		panic(err)
	}
	out := make([]*Script, 0, len(entries))
	for _, e := range entries {
		out = append(out, mustLoad(e.Name()[:len(e.Name())-len(".lua")]))
	}
	return out
}

// mustLoad reads name.lua from the embedded files. A missing file is a
// programming error and panics at package initialisation.
func mustLoad(name string) *Script {
	b, err := files.ReadFile(name + ".lua")
	if err != nil {
		panic(fmt.Sprintf("lua: missing embedded script %s.lua: %v", name, err))
	}
	src := string(b)
	return &Script{name: name, source: src, rs: redis.NewScript(src)}
}
