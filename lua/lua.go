// Package lua holds every Lua script of the coordination primitives, one
// .lua file per script, embedded with go:embed, for users and operators to
// read and audit: to pre-load them (SCRIPT LOAD), to review which commands
// and keys they touch when writing an ACL, or to decode what a key holds.
// It exports a read-only view and nothing else; the library runs the
// scripts through its internal engine.
//
// Each file begins with a comment block giving its KEYS (with their roles),
// ARGV (with units), the reply shape and the error codes it can return.
// The scripts share these conventions:
//
//   - Time comes from the server: redis.call('TIME') converted once to
//     integer milliseconds (the rate limiters' decisions: microseconds).
//     The application's clock never enters a shared decision.
//   - Arithmetic is integer milliseconds or microseconds (or permits);
//     every number stays an exact integer below 2^53. 64-bit values that may
//     exceed 2^53 (fencing tokens) are handled as decimal strings and
//     returned as strings.
//   - A script validates everything it reads before writing anything. A
//     failure is an error reply whose text starts with a stable code
//     (COORD_BADCOUNTER, COORD_WRONGTYPE, COORD_CAPACITY_MISMATCH, ...); a
//     key of the wrong Redis type read with redis.call raises the server's
//     own WRONGTYPE before anything is written. Other server errors (a
//     command the ACL denies, OOM) are never caught: they reach the
//     caller, a denied command reported as NOPERM on every server.
//   - Scripts touch only the keys passed in KEYS, and are idempotent under a
//     re-send with the same owner token or request id (go-redis re-sends a
//     command after a lost reply).
//   - Release notifications are best effort: scripts PUBLISH with
//     redis.pcall on the channel "coordination:" followed by KEYS[1], so a
//     user whose ACL forbids the channel still releases, and its waiters
//     fall back to expiry and periodic re-checks.
package lua

import (
	"embed"
	"io/fs"
	"slices"
	"strings"
)

//go:embed *.lua
var files embed.FS

// FS returns the scripts as a read-only file system: one file per script,
// named NAME.lua at its root.
func FS() fs.FS { return files }

// Names returns the name of every script (its file name without .lua), in
// file-name order, as a new slice.
func Names() []string {
	entries, err := files.ReadDir(".")
	if err != nil {
		return nil
	}
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		out = append(out, strings.TrimSuffix(e.Name(), ".lua"))
	}
	slices.Sort(out)
	return out
}
