// Package lua holds every Lua script of the coordination primitives, one
// .lua file per script, embedded with go:embed, for users and operators to
// read and audit: to pre-load them (SCRIPT LOAD), to review which commands
// and keys they touch when writing an ACL, or to decode what a key holds.
// It exports a read-only view and nothing else; the library runs the
// scripts through its internal engine.
//
// Each file begins with a comment block giving its KEYS (with their roles),
// ARGV (with units), the reply shape and the error codes it can return.
// Parts that several scripts share (reading the server's time, pruning and
// re-expiring a sorted set, reading and checking a latch's hash, each rate
// limiter's arithmetic) are written once, in the source tree's
// lua/fragments/, and included where a script's source has a line
// "--#include NAME" (a whole fragment) or "--#include NAME.SECTION" (one
// section of a fragment written in sections); [FS] serves each script
// assembled, the text the library sends and whose SHA1 it runs under
// EVALSHA, each fragment beginning with a comment "-- fragment NAME:" and
// each section with "-- NAME.SECTION:".
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
//     command after a lost reply), except the rate limiters' consumptive
//     decisions, settlements and refunds, which the engine sends at most
//     once (engine Script.Once).
//   - Release notifications are best effort, and written once, in the
//     fragment notify (its function wake): SPUBLISH with redis.pcall on
//     KEYS[1]'s shard channel, in KEYS[1]'s Cluster slot ("coordination:"
//     followed by KEYS[1] when it has a hash tag, by KEYS[1] and KEYS[1]
//     again in braces when it holds no brace), and PUBLISH on the classic
//     channel "coordination:" followed by KEYS[1] when the server refuses
//     SPUBLISH (before Redis 7.0, or an ACL without it) or KEYS[1] has no
//     shard channel. A user whose ACL forbids the channel still releases,
//     and its waiters fall back to expiry and periodic re-checks.
package lua

import (
	"bytes"
	"embed"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"
	"time"
)

// The sources: one file per script at the root, and under fragments/ the
// parts several scripts share, each written once. A script takes a
// fragment in with a line of its own, "--#include NAME" (NAME.lua under
// fragments/), replaced by the fragment's text when the package
// initialises; what FS serves, and what the library runs, is the assembled
// text. A fragment may be written in sections, each starting at a line
// "--#section SECTION" and running to the next or to the end; such a
// fragment is taken in a section at a time ("--#include NAME.SECTION"),
// and the text before its first section (its description) is never
// included.
//
//go:embed *.lua fragments/*.lua
var sources embed.FS

// includeMarker starts a line that takes in a fragment or a section of
// one; sectionMarker starts a fragment's section.
const (
	includeMarker = "--#include "
	sectionMarker = "--#section "
)

// assembled holds every script's assembled text by file name (NAME.lua),
// built once at initialisation; names lists them in file-name order.
var assembled, names = mustAssemble()

func mustAssemble() (map[string][]byte, []string) {
	out, err := assemble(sources)
	if err != nil {
		panic("lua: " + err.Error())
	}
	ns := make([]string, 0, len(out))
	for n := range out {
		ns = append(ns, strings.TrimSuffix(n, ".lua"))
	}
	slices.Sort(ns)
	return out, ns
}

// assemble reads the scripts at the root of src and replaces each include
// line with the named fragment under fragments/, or the named section of
// it. A fragment includes nothing; an include naming no fragment or no
// section, or a fragment written in sections taken in whole, is an error.
func assemble(src fs.FS) (map[string][]byte, error) {
	entries, err := fs.ReadDir(src, ".")
	if err != nil {
		return nil, err
	}
	out := make(map[string][]byte)
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".lua") {
			continue
		}
		b, err := fs.ReadFile(src, e.Name())
		if err != nil {
			return nil, err
		}
		var buf bytes.Buffer
		for line := range strings.SplitAfterSeq(string(b), "\n") {
			name, ok := strings.CutPrefix(strings.TrimRight(line, "\n"), includeMarker)
			if !ok {
				buf.WriteString(line)
				continue
			}
			f, err := fragment(src, name)
			if err != nil {
				return nil, fmt.Errorf("%s: include %q: %w", e.Name(), name, err)
			}
			buf.Write(f)
		}
		out[e.Name()] = buf.Bytes()
	}
	return out, nil
}

// fragment returns the text an include of name takes in: the fragment
// NAME.lua under fragments/ whole, or for NAME.SECTION that fragment's
// section.
func fragment(src fs.FS, name string) ([]byte, error) {
	file, section, sectioned := strings.Cut(name, ".")
	f, err := fs.ReadFile(src, "fragments/"+file+".lua")
	if err != nil {
		return nil, err
	}
	if bytes.Contains(f, []byte(includeMarker)) {
		return nil, fmt.Errorf("fragment %q includes another", file)
	}
	sections := sectionsOf(f)
	switch {
	case !sectioned && sections == nil:
		return f, nil
	case !sectioned:
		return nil, fmt.Errorf("fragment %q is written in sections: include one", file)
	}
	body, ok := sections[section]
	if !ok {
		return nil, fmt.Errorf("fragment %q has no section %q", file, section)
	}
	return body, nil
}

// sectionsOf splits a fragment written in sections into their texts by
// name (nil for a fragment without sections).
func sectionsOf(f []byte) map[string][]byte {
	var (
		out  map[string][]byte
		name string
	)
	for line := range strings.SplitAfterSeq(string(f), "\n") {
		if n, ok := strings.CutPrefix(strings.TrimRight(line, "\n"), sectionMarker); ok {
			if out == nil {
				out = make(map[string][]byte)
			}
			name = n
			out[name] = []byte{}
			continue
		}
		if out != nil {
			out[name] = append(out[name], line...)
		}
	}
	return out
}

// FS returns the scripts as a read-only file system: one file per script,
// named NAME.lua at its root, holding the assembled text the library runs
// (its fragments included), so that its SHA1 is the one EVALSHA uses.
func FS() fs.FS { return scriptFS{} }

// Names returns the name of every script (its file name without .lua), in
// file-name order, as a new slice.
func Names() []string { return slices.Clone(names) }

// scriptFS serves the assembled scripts; it holds nothing a caller can
// change.
type scriptFS struct{}

// Open opens the named script (NAME.lua, at the root; "." is the root
// directory) for reading its assembled text, as fs.FS requires: a
// *fs.PathError wrapping fs.ErrInvalid for a name fs.ValidPath refuses, or
// fs.ErrNotExist for a name that is no script. Each call returns a new file
// reading a shared text it cannot change; safe for concurrent use.
func (scriptFS) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	if name == "." {
		return &dirFile{}, nil
	}
	b, ok := assembled[name]
	if !ok {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return &scriptFile{info: fileInfo{name: name, size: int64(len(b))}, r: bytes.NewReader(b)}, nil
}

// ReadFile returns a copy of the named script's assembled text.
func (scriptFS) ReadFile(name string) ([]byte, error) {
	b, ok := assembled[name]
	if !ok || !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "readfile", Path: name, Err: fs.ErrNotExist}
	}
	return bytes.Clone(b), nil
}

// ReadDir lists the scripts (the root is the only directory).
func (s scriptFS) ReadDir(name string) ([]fs.DirEntry, error) {
	if name != "." {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrNotExist}
	}
	return entries(), nil
}

func entries() []fs.DirEntry {
	out := make([]fs.DirEntry, len(names))
	for i, n := range names {
		out[i] = fs.FileInfoToDirEntry(fileInfo{name: n + ".lua", size: int64(len(assembled[n+".lua"]))})
	}
	return out
}

type fileInfo struct {
	name string
	size int64
	dir  bool
}

// Name implements fs.FileInfo.
func (fi fileInfo) Name() string { return fi.name }

// Size implements fs.FileInfo.
func (fi fileInfo) Size() int64 { return fi.size }

// Mode implements fs.FileInfo.
func (fi fileInfo) Mode() fs.FileMode {
	if fi.dir {
		return fs.ModeDir | 0o555
	}
	return 0o444
}

// ModTime implements fs.FileInfo.
func (fi fileInfo) ModTime() time.Time { return time.Time{} }

// IsDir implements fs.FileInfo.
func (fi fileInfo) IsDir() bool { return fi.dir }

// Sys implements fs.FileInfo.
func (fi fileInfo) Sys() any { return nil }

type scriptFile struct {
	info fileInfo
	r    *bytes.Reader
}

// Stat implements fs.File (and io.Seeker) over one assembled script.
func (f *scriptFile) Stat() (fs.FileInfo, error) { return f.info, nil }

// Read implements fs.File (and io.Seeker) over one assembled script.
func (f *scriptFile) Read(p []byte) (int, error) { return f.r.Read(p) }

// Seek implements fs.File (and io.Seeker) over one assembled script.
func (f *scriptFile) Seek(off int64, whence int) (int64, error) {
	return f.r.Seek(off, whence)
}

// Close implements fs.File (and io.Seeker) over one assembled script.
func (f *scriptFile) Close() error { return nil }

// dirFile is the root directory, listing the scripts.
type dirFile struct{ off int }

// Stat implements fs.ReadDirFile for the root directory.
func (d *dirFile) Stat() (fs.FileInfo, error) { return fileInfo{name: ".", dir: true}, nil }

// Read implements fs.ReadDirFile for the root directory.
func (d *dirFile) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: ".", Err: fs.ErrInvalid}
}

// Close implements fs.ReadDirFile for the root directory.
func (d *dirFile) Close() error { return nil }

// ReadDir implements fs.ReadDirFile for the root directory.
func (d *dirFile) ReadDir(n int) ([]fs.DirEntry, error) {
	all := entries()
	rest := all[d.off:]
	if n <= 0 {
		d.off = len(all)
		return rest, nil
	}
	if len(rest) == 0 {
		return nil, io.EOF
	}
	if n > len(rest) {
		n = len(rest)
	}
	d.off += n
	return rest[:n], nil
}
