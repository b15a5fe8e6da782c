package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/internal/fencingcore"
	"github.com/coordkit/coordination/internal/layout"
)

func init() {
	register(command{name: "fence retire", usage: "fence retire --key K [--lease L]                     delete a fenced name's counter (its tokens start again at 1)", run: runFenceRetire})
}

// runFenceRetire deletes the fence counter of one fenced name: its field
// in the shared counter hash of its slot, and the earlier layout's counter
// key or tombstone, in one WATCH/MULTI transaction.
func runFenceRetire(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("fence retire", stdout, stderr, `usage: coordctl fence retire --key K [--lease L]

Retires the fenced name whose counter key is K (the fenceKey given to
fencing.New or leader.New; for coordctl lock run and leader run, {K}:fence):
deletes its counter, a field of the shared counter hash of its Cluster slot
(and the counter key of the layout before it, or its "moved" tombstone), so
that the counters of names no longer used do not pile up. It prints the last
token handed out.

Retiring resets the sequence: the next acquisition of the name draws token 1
again. Retire a name only when no guarded resource will ever compare its
tokens again (the resource was deleted, or it will never see a write of this
name again); otherwise keep the counter (about 28 bytes a name), or make the
resource forget its highest token first. With --lease L the command refuses
while the lease key L exists (the name is held now); without it, nothing
checks that the name is unused.
Exit status: 0 retired; 1 no counter for K, a key of another kind, or the lease
is held; 2 bad usage; 3 the server cannot be reached.`, `coordctl fence retire --redis redis://127.0.0.1:6379/0 --key '{invoice:42}:fence' --lease '{invoice:42}:lease'`)
	key := fs.String("key", "", "the fence counter key (without the prefix), e.g. {invoice:42}:fence; required")
	lease := fs.String("lease", "", "the name's lease key: refuse while it exists (optional)")
	return oneShot(fs, args, key, 0, func() int {
		if *lease != "" {
			return fs.checkKey(*lease)
		}
		return 0
	}, func(ctx context.Context, coord *coordination.Coordinator) int {
		prefix := fs.cf.prefix
		full := prefix + *key
		shared := fencingcore.SharedKeyOf(prefix, full)
		if shared == "" {
			return refusal(stderr, fs.name, fmt.Errorf("%w: no shared counter hash lies in the slot of %q under the key prefix", errRefused, full))
		}
		c := coord.Client()
		watch := []string{shared, full}
		leaseFull := ""
		if *lease != "" {
			leaseFull = prefix + *lease
			watch = append(watch, leaseFull)
		}
		var last string
		var err error
		for range 5 {
			err = c.Watch(ctx, func(tx *redis.Tx) error {
				if leaseFull != "" {
					n, err := tx.Exists(ctx, leaseFull).Result()
					if err != nil {
						return err
					}
					if n != 0 {
						return fmt.Errorf("%w: the lease %q exists: the name is held now", errRefused, leaseFull)
					}
				}
				v, err := tx.HGet(ctx, shared, full).Result()
				switch {
				case errors.Is(err, redis.Nil):
					v = ""
				case err != nil && strings.HasPrefix(err.Error(), "WRONGTYPE"):
					return fmt.Errorf("%w: %q is not a shared counter hash (see coordctl inspect)", errWrongKind, shared)
				case err != nil:
					return err
				}
				typ, err := tx.Type(ctx, full).Result()
				if err != nil {
					return err
				}
				old := ""
				switch typ {
				case "none":
				case "string":
					if old, err = tx.Get(ctx, full).Result(); err != nil {
						return err
					}
					if old != "moved" && !fencingcore.CounterLayout.Match(&layout.Snapshot{Str: old}) {
						return fmt.Errorf("%w: %q holds a string that is not a fence counter (see coordctl inspect)", errWrongKind, full)
					}
				default:
					return fmt.Errorf("%w: %q holds a %s, not a fence counter (see coordctl inspect)", errWrongKind, full, typ)
				}
				if v == "" && (old == "" || old == "moved") {
					return fmt.Errorf("%w %q: no fence counter (in %s or as a key)", errNoKey, full, shared)
				}
				last = v
				if v == "" {
					last = old // the earlier layout's counter, never folded
				}
				_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
					p.HDel(ctx, shared, full)
					p.Del(ctx, full)
					return nil
				})
				return err
			}, watch...)
			if !errors.Is(err, redis.TxFailedErr) {
				break
			}
		}
		if errors.Is(err, redis.TxFailedErr) {
			err = fmt.Errorf("%q kept changing; try again", full)
		}
		if err != nil {
			return refusal(stderr, fs.name, err)
		}
		fmt.Fprintf(stdout, "retired the fence counter %q (last token %s): its next acquisition draws token 1\n", full, last)
		return exitOK
	})
}
