package main

import (
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/fencing"
	"github.com/coordkit/coordination/idempotency"
	"github.com/coordkit/coordination/internal/fencingcore"
	"github.com/coordkit/coordination/internal/httpreplay"
	"github.com/coordkit/coordination/internal/idempotencycore"
	"github.com/coordkit/coordination/internal/latchcore"
	"github.com/coordkit/coordination/internal/layout"
	"github.com/coordkit/coordination/internal/lockcore"
	"github.com/coordkit/coordination/internal/rwleasecore"
	"github.com/coordkit/coordination/internal/semaphorecore"
	"github.com/coordkit/coordination/internal/slot"
	"github.com/coordkit/coordination/latch"
	"github.com/coordkit/coordination/lock"
	"github.com/coordkit/coordination/rwlease"
	"github.com/coordkit/coordination/semaphore"
)

// The commands that read or change a key only when it holds the kind they
// expect: idempotency show|forget and the repair commands (the manual
// recoveries the packages document). Each refuses a key of another kind
// (exit 1) and changes nothing then; changes are made in a WATCH/MULTI
// transaction, so a key that changed kind (or holder) meanwhile is not
// touched either.

func init() {
	register(command{name: "idempotency show", usage: "idempotency show --key K [--namespace NS] [--result [--raw]]  show an idempotency claim (and its stored result)", run: runIdemShow})
	register(command{name: "idempotency forget", usage: "idempotency forget --key K [--namespace NS] [--pending]  delete an idempotency claim", run: runIdemForget(false)})
	register(command{name: "repair claim", usage: "repair claim --key K [--namespace NS]                   delete an orphaned (pending) idempotency claim", run: runIdemForget(true)})
	register(command{name: "repair semaphore", usage: "repair semaphore --key K --list | --permit TOKEN       remove a permit without expiry whose holder is gone", run: runRepairSemaphore})
	register(command{name: "repair latch", usage: "repair latch --key K --reset N [--deadline D] | --delete  replace or delete a broken latch", run: runRepairLatch})
}

// errWrongKind is a key that holds another kind than the command expects.
var errWrongKind = errors.New("wrong kind of key")

// article puts "a" or "an" before a kind: "an idempotency claim", "an
// unknown".
func article(kind string) string {
	if kind != "" && strings.ContainsRune("aeiou", rune(kind[0])) {
		return "an " + kind
	}
	return "a " + kind
}

// errNoKey is a key that does not exist.
var errNoKey = errors.New("no such key")

// expectKind fetches key and checks that it holds one of kinds. The error
// wraps errWrongKind, saying what the key holds.
func expectKind(ctx context.Context, c redis.Cmdable, key string, kinds ...string) (*layout.Report, error) {
	s, err := fetchOne(ctx, c, key)
	if err != nil {
		return nil, err
	}
	r := decode(s)
	if !slices.Contains(kinds, r.Kind) {
		if r.Kind == layout.KindMissing {
			return r, fmt.Errorf("%w %q", errNoKey, key)
		}
		return r, fmt.Errorf("%w: %q holds %s, not %s (see coordctl inspect)", errWrongKind, key, article(r.Kind), article(strings.Join(kinds, " or ")))
	}
	return r, nil
}

// guarded runs change in a transaction on key after checking, under
// WATCH, that key still holds one of kinds; check may refuse with an
// error after looking at the report. It retries when the key changed
// between WATCH and EXEC (a few times).
func guarded(ctx context.Context, c redis.UniversalClient, key string, kinds []string, check func(*layout.Report) error, change func(p redis.Pipeliner, r *layout.Report)) (*layout.Report, error) {
	var rep *layout.Report
	for range 5 {
		err := c.Watch(ctx, func(tx *redis.Tx) error {
			r, err := expectKind(ctx, tx, key, kinds...)
			if err != nil {
				return err
			}
			if check != nil {
				if err := check(r); err != nil {
					return err
				}
			}
			rep = r
			_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
				change(p, r)
				return nil
			})
			return err
		}, key)
		if !errors.Is(err, redis.TxFailedErr) {
			return rep, err
		}
	}
	return nil, fmt.Errorf("%q kept changing; try again", key)
}

// refusal prints err for a command and returns its exit status: 1 for a
// missing key, a key of another kind (or a refused repair), else fail's.
func refusal(stderr io.Writer, name string, err error) int {
	if errors.Is(err, errWrongKind) || errors.Is(err, errNoKey) || errors.Is(err, errRefused) {
		fmt.Fprintf(stderr, "coordctl %s: %v\n", name, err)
		return exitRefused
	}
	return fail(stderr, name, err)
}

var errRefused = errors.New("refused")

// claimKey returns the key of a claim: the middleware's
// (idempotency.StoreKey(ns, key)) when --namespace was given, even as ""
// (the middleware's default, empty namespace: "idempotency:0::KEY"), else
// key itself (a Store's claim).
func claimKey(fs *cmdFlags, prefix, ns, key string) string {
	if ns != "" || fs.given("namespace") {
		return prefix + idempotency.StoreKey(ns, key)
	}
	return prefix + key
}

// given reports whether flag name was given on the command line.
func (c *cmdFlags) given(name string) bool {
	set := false
	c.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// middlewareResult renders a result the idempotency middleware stored (an
// encoded HTTP response: see idempotency/response.go) as an HTTP response:
// the status line, the stored headers, a blank line and the body. ok is
// false when res is not such an encoding.
func middlewareResult(res string) (string, bool) {
	r, ok := httpreplay.Decode([]byte(res))
	if !ok {
		return "", false
	}
	var out strings.Builder
	fmt.Fprintf(&out, "HTTP %d %s\n", r.Status, http.StatusText(r.Status))
	names := make([]string, 0, len(r.Header))
	for n := range r.Header {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		for _, v := range r.Header[n] {
			fmt.Fprintf(&out, "%s: %s\n", n, v)
		}
	}
	out.WriteString("\n")
	if printable(string(r.Body)) {
		out.WriteString(strings.TrimSuffix(string(r.Body), "\n") + "\n")
	} else {
		fmt.Fprintf(&out, "(binary body, %d bytes, in base64:)\n%s\n", len(r.Body), base64.StdEncoding.EncodeToString(r.Body))
	}
	return out.String(), true
}

func runIdemShow(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("idempotency show", stdout, stderr, `usage: coordctl idempotency show --key K [--namespace NS] [--result [--raw]]

Shows the idempotency claim at K: pending or completed, its owner (truncated),
whether a fingerprint was stored, the result's size and HTTP status, and its TTL.
With --namespace the key is the middleware's (idempotency.StoreKey(NS, K));
--namespace "" names the middleware's default (empty) namespace. With --result it
prints the stored result instead: a middleware claim's as the HTTP response it
stored (status, headers, blank line, body); any other as text with a newline when
it is printable, else in base64 (with a note on stderr); --raw writes its bytes as
stored.
Exit status: 0 shown; 1 no claim at K, or a key of another kind; 2 bad usage; 3 the
server cannot be reached.`, `coordctl idempotency show --redis redis://127.0.0.1:6379/0 --key pay:8f14e45f
coordctl idempotency show --key 8f14e45f --namespace tenant:42 --result | jq .`)
	key := fs.String("key", "", "claim key (as given to Begin); required")
	ns := fs.String("namespace", "", "the middleware's namespace of the key; --namespace \"\" for its default (empty) namespace")
	result := fs.Bool("result", false, "print the stored result (text, or base64 when it is binary)")
	raw := fs.Bool("raw", false, "with --result: write the result's bytes as stored, nothing added")
	return oneShot(fs, args, key, 0, func() int {
		if *raw && !*result {
			return fs.usagef("--raw goes with --result, e.g. --result --raw")
		}
		return 0
	}, func(ctx context.Context, coord *coordination.Coordinator) int {
		full := claimKey(fs, fs.cf.prefix, *ns, *key)
		middleware := *ns != "" || fs.given("namespace")
		r, err := expectKind(ctx, coord.Client(), full, idempotencycore.ClaimLayout.Kind)
		if err != nil {
			return refusal(stderr, fs.name, err)
		}
		if *result {
			res, err := claimResult(ctx, coord.Client(), full)
			if err != nil {
				return refusal(stderr, fs.name, err)
			}
			rendered, isHTTP := "", false
			if middleware {
				rendered, isHTTP = middlewareResult(res)
			}
			switch {
			case *raw:
				_, _ = io.WriteString(stdout, res)
			case isHTTP:
				_, _ = io.WriteString(stdout, rendered)
			case printable(res):
				_, _ = io.WriteString(stdout, strings.TrimSuffix(res, "\n")+"\n")
			default:
				fmt.Fprintln(stdout, base64.StdEncoding.EncodeToString([]byte(res)))
				fmt.Fprintf(stderr, "coordctl idempotency show: the result (%d bytes) is binary, shown in base64; --raw writes its bytes\n", len(res))
			}
			return exitOK
		}
		fmt.Fprint(stdout, r.Text())
		if r.Problem != "" {
			return exitRefused
		}
		return exitOK
	})
}

func runIdemForget(orphan bool) func(args []string, stdout, stderr io.Writer) int {
	return func(args []string, stdout, stderr io.Writer) int {
		name, usage, example := "idempotency forget", `usage: coordctl idempotency forget --key K [--namespace NS] [--pending]

Deletes the idempotency claim at K, so that the next request with that key runs
the work again. A completed, abandoned or failed claim is deleted (a failed one
once its outcome is checked); a pending one only with --pending
(its owner may still be working: see coordctl repair claim).`, `coordctl idempotency forget --redis redis://127.0.0.1:6379/0 --key pay:8f14e45f`
		if orphan {
			name, usage, example = "repair claim", `usage: coordctl repair claim --key K [--namespace NS]

Deletes an orphaned idempotency claim: a pending claim whose owner crashed or
hangs, so that a retry can run the work now instead of when the claim expires.
Its owner, if still alive, then finds its claim gone (its Complete returns
false). A completed claim is refused (use coordctl idempotency forget). A claim
of a layout the library no longer reads is deleted whatever its state.`, `coordctl repair claim --redis redis://127.0.0.1:6379/0 --key pay:8f14e45f`
		}
		fs := newFlags(name, stdout, stderr, usage+`
Exit status: 0 deleted; 1 no claim at K, a key of another kind, or a claim in the
other state; 2 bad usage; 3 the server cannot be reached.`, example)
		key := fs.String("key", "", "claim key (as given to Begin); required")
		ns := fs.String("namespace", "", "the middleware's namespace of the key; --namespace \"\" for its default (empty) namespace")
		pending := orphan
		if !orphan {
			fs.BoolVar(&pending, "pending", false, "also delete a pending claim (its owner may still be working)")
		}
		return oneShot(fs, args, key, 0, nil, func(ctx context.Context, coord *coordination.Coordinator) int {
			full := claimKey(fs, fs.cf.prefix, *ns, *key)
			r, err := guarded(ctx, coord.Client(), full, []string{idempotencycore.ClaimLayout.Kind}, func(r *layout.Report) error {
				state := fieldOf(r, "state")
				legacy := r.Problem != "" && fieldOf(r, "layout") == idempotencycore.LegacyClaimForm
				switch {
				case legacy:
					return nil // no longer read by the library: nothing can use it
				case orphan && state != "pending":
					return fmt.Errorf("%w: the claim at %q is %s, not pending: use coordctl idempotency forget", errRefused, full, state)
				case !pending && state == "pending":
					return fmt.Errorf("%w: the claim at %q is pending: its owner may still be working; give --pending (or use coordctl repair claim) to delete it anyway", errRefused, full)
				}
				return nil
			}, func(p redis.Pipeliner, _ *layout.Report) { p.Del(ctx, full) })
			if err != nil {
				return refusal(stderr, fs.name, err)
			}
			fmt.Fprintf(stdout, "deleted the %s claim at %q\n", fieldOf(r, "state"), full)
			return exitOK
		})
	}
}

// printable reports whether a result is text a terminal shows as is:
// valid UTF-8 without control characters other than tab and newlines.
func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) && r != '\n' && r != '\t' && r != '\r' {
			return false
		}
	}
	return true
}

// fieldOf returns a report field's value as text ("" when absent).
func fieldOf(r *layout.Report, k string) string {
	for _, f := range r.Fields {
		if f.K == k {
			return fmt.Sprint(f.V)
		}
	}
	return ""
}

func runRepairSemaphore(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("repair semaphore", stdout, stderr, `usage: coordctl repair semaphore --key K --list
       coordctl repair semaphore --key K --permit TOKEN

A permit without expiry (a member scored +inf, which only a hand edit writes:
the library gives every permit a TTL) outlives a crashed holder: it occupies
capacity until removed by hand. --list lists the permits without expiry (the
member, with the full token: the holder's process can be matched with it);
--permit removes the one whose token starts with TOKEN, once you know its holder
is gone. Permits with an expiry are refused: they free themselves.
Exit status: 0 listed or removed; 1 not a semaphore, or no such permit without
expiry (or several match TOKEN); 2 bad usage; 3 the server cannot be reached.`, `coordctl repair semaphore --redis redis://127.0.0.1:6379/0 --key encoders --list
coordctl repair semaphore --key encoders --permit 3f2a9c1e`)
	key := fs.String("key", "", "semaphore key; required")
	list := fs.Bool("list", false, "list the permits without expiry")
	permit := fs.String("permit", "", "remove the permit without expiry whose token starts with this")
	return oneShot(fs, args, key, 0, func() int {
		if *list == (*permit != "") {
			return fs.usagef("give --list or --permit TOKEN, e.g. --list")
		}
		return 0
	}, func(ctx context.Context, coord *coordination.Coordinator) int {
		full := fs.cf.prefix + *key
		c := coord.Client()
		if *list {
			if _, err := expectKind(ctx, c, full, semaphorecore.SemaphoreLayout.Kind); err != nil {
				return refusal(stderr, fs.name, err)
			}
			ms, err := c.ZRangeByScore(ctx, full, &redis.ZRangeBy{Min: "+inf", Max: "+inf"}).Result()
			if err != nil {
				return fail(stderr, fs.name, err)
			}
			for _, m := range ms {
				fmt.Fprintln(stdout, m)
			}
			fmt.Fprintf(stdout, "%d permit(s) without expiry\n", len(ms))
			return exitOK
		}
		var (
			member  string
			ms      []redis.Z // the members, read under WATCH
			deleted bool
		)
		_, err := guarded(ctx, c, full, []string{semaphorecore.SemaphoreLayout.Kind}, func(*layout.Report) error {
			member = ""
			var err error
			ms, err = c.ZRangeWithScores(ctx, full, 0, -1).Result()
			if err != nil {
				return err
			}
			var found []redis.Z
			for _, z := range ms {
				m, _ := z.Member.(string)
				parts := strings.SplitN(m, ":", 3)
				if len(parts) == 3 && parts[0] == "P" && strings.HasPrefix(parts[2], *permit) {
					found = append(found, z)
				}
			}
			switch {
			case len(found) == 0:
				return fmt.Errorf("%w: no permit of %q has a token starting with %q (see --list)", errRefused, full, *permit)
			case len(found) > 1:
				return fmt.Errorf("%w: %d permits of %q have a token starting with %q: give more of it", errRefused, len(found), full, *permit)
			case !math.IsInf(found[0].Score, 1):
				return fmt.Errorf("%w: that permit expires by itself (in %v): only permits without expiry need a repair", errRefused,
					time.Until(time.UnixMilli(int64(found[0].Score))).Round(time.Second))
			}
			member, _ = found[0].Member.(string)
			return nil
		}, func(p redis.Pipeliner, _ *layout.Report) {
			// As a release does: with no permit left the key goes (the
			// records alone would stay forever, the key having no TTL
			// while a permit without expiry was there); with permits left
			// that all expire, the key expires with the latest of them.
			// A key with a capacity set in it ("capacity-set") keeps no
			// TTL and stays, as a release leaves it.
			var left []redis.Z
			forever, kept := false, false
			for _, z := range ms {
				m, _ := z.Member.(string)
				if strings.HasPrefix(m, "P:") && m != member {
					left = append(left, z)
					forever = forever || math.IsInf(z.Score, 1)
				}
				kept = kept || m == "capacity-set"
			}
			switch {
			case kept:
				p.ZRem(ctx, full, member)
			case len(left) == 0:
				p.Del(ctx, full)
			case !forever:
				top := slices.MaxFunc(left, func(a, b redis.Z) int { return cmp.Compare(a.Score, b.Score) })
				p.ZRem(ctx, full, member)
				p.PExpireAt(ctx, full, time.UnixMilli(int64(top.Score)))
			default:
				p.ZRem(ctx, full, member)
			}
			deleted = !kept && len(left) == 0
		})
		if err != nil {
			return refusal(stderr, fs.name, err)
		}
		if deleted {
			fmt.Fprintf(stdout, "removed %s from %q, its last permit: deleted the key\n", member, full)
			return exitOK
		}
		fmt.Fprintf(stdout, "removed %s from %q\n", member, full)
		return exitOK
	})
}

func runRepairLatch(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("repair latch", stdout, stderr, `usage: coordctl repair latch --key K --reset N [--deadline D] [--force]
       coordctl repair latch --key K --delete [--force]

A broken latch (its deadline passed before it reached zero) stays broken: waiters
get latch.ErrBroken. --reset replaces it with a new generation of count N (old
waiters return, old count-downs are refused); it refuses a latch that is not
broken (open or complete, in use) unless --force is given. --delete removes the
latch (waiters return false, count-downs report not found), and likewise asks for
--force when the latch is not broken. Both refuse a key that is not a latch.
Exit status: 0 done; 1 no such key, not a latch, or a latch that is not broken
(without --force); 2 bad usage; 3 the server cannot be reached.`, `coordctl repair latch --redis redis://127.0.0.1:6379/0 --key batch:42:done --reset 3 --deadline 10m
coordctl repair latch --key batch:42:done --delete`)
	key := fs.String("key", "", "latch key; required")
	reset := fs.Int64("reset", -1, "replace the latch with a new generation of this count")
	deadline := fs.Duration("deadline", 0, "with --reset: the new generation's deadline (omit: none)")
	del := fs.Bool("delete", false, "delete the latch")
	force := fs.Bool("force", false, "replace (--reset) or delete (--delete) a latch that is not broken (open or complete) too")
	return oneShot(fs, args, key, 0, func() int {
		if (*reset >= 0) == *del {
			return fs.usagef("give --reset N or --delete, e.g. --reset 3")
		}
		return 0
	}, func(ctx context.Context, coord *coordination.Coordinator) int {
		full := fs.cf.prefix + *key
		if *del {
			r, err := guarded(ctx, coord.Client(), full, []string{latchcore.LatchLayout.Kind}, func(r *layout.Report) error {
				if live(r) && !*force {
					return fmt.Errorf("%w: the latch %q (generation %s) is %s, not broken: --delete would drop its waiters and count-downs; give --force to delete it anyway",
						errRefused, full, fieldOf(r, "generation"), fieldOf(r, "state"))
				}
				return nil
			}, func(p redis.Pipeliner, _ *layout.Report) { p.Del(ctx, full) })
			if err != nil {
				return refusal(stderr, fs.name, err)
			}
			fmt.Fprintf(stdout, "deleted the latch %q (generation %s, %s)\n", full, fieldOf(r, "generation"), fieldOf(r, "state"))
			return exitOK
		}
		r, err := expectKind(ctx, coord.Client(), full, latchcore.LatchLayout.Kind)
		if err != nil {
			return refusal(stderr, fs.name, err)
		}
		// A corrupt latch is broken too: the library cannot use it.
		if live(r) && !*force {
			fmt.Fprintf(stderr, "coordctl repair latch: the latch %q (generation %s) is %s, not broken: --reset would drop its waiters and count-downs; give --force to replace it anyway\n",
				full, fieldOf(r, "generation"), fieldOf(r, "state"))
			return exitRefused
		}
		var opts []latch.Option
		if *deadline > 0 {
			opts = append(opts, latch.WithDeadline(*deadline))
		}
		lt, err := latch.New(coord, *key, opts...)
		if err != nil {
			return fail(stderr, fs.name, err)
		}
		l, err := lt.Reset(ctx, *reset)
		if err != nil {
			return fail(stderr, fs.name, err)
		}
		fmt.Fprintf(stdout, "replaced the latch %q (generation %s, %s) with generation %d, count %d\n", full, fieldOf(r, "generation"), fieldOf(r, "state"), l.Number(), l.Initial())
		return exitOK
	})
}

// live reports whether a latch is in use: open or complete, neither
// broken nor corrupt (a corrupt latch is broken too: the library cannot
// use it).
func live(r *layout.Report) bool {
	return !strings.HasPrefix(fieldOf(r, "state"), "broken") && r.Problem == ""
}

// claimResult reads the stored result of the completed claim at key.
func claimResult(ctx context.Context, c redis.UniversalClient, key string) (string, error) {
	v, err := c.Get(ctx, key).Result()
	if err != nil {
		return "", err
	}
	res, instead := idempotencycore.ClaimResult(v)
	switch instead {
	case "":
		return res, nil
	case "abandoned":
		return "", fmt.Errorf("%w: the claim at %q is abandoned: no result (the next Begin claims it afresh)", errRefused, key)
	case "failed":
		return "", fmt.Errorf("%w: the claim at %q is failed (its work failed, outcome unknown): no result", errRefused, key)
	case "pending":
		return "", fmt.Errorf("%w: the claim at %q is pending: no result yet", errRefused, key)
	}
	return "", fmt.Errorf("%w: the claim at %q has a bad fingerprint", errRefused, key)
}

func init() {
	register(command{name: "repair lock", usage: "repair lock --key K --owner TOKEN                   force-release a lock or lease whose holder hangs", run: runRepairLock})
}

// leaseKinds are the kinds repair lock force-releases.
var leaseKinds = []string{lockcore.LockLayout.Kind, fencingcore.LeaseLayout.Kind, rwleasecore.LeaseLayout.Kind, semaphorecore.SemaphoreLayout.Kind}

// forcer is one lease kind's holder read and force release, through the
// library (so that the release wakes blocked acquirers as the holder's
// own release does).
type forcer struct {
	holders func(ctx context.Context) ([]coordination.Holder, error)
	release func(ctx context.Context, token string) (bool, error)
}

// forcerFor returns the force release of the lease of kind at key (without
// the prefix; full with it).
func forcerFor(ctx context.Context, coord *coordination.Coordinator, kind, key, full string) (forcer, error) {
	one := func(read func(context.Context) (coordination.Holder, error)) func(context.Context) ([]coordination.Holder, error) {
		return func(ctx context.Context) ([]coordination.Holder, error) {
			h, err := read(ctx)
			if errors.Is(err, coordination.ErrNotHeld) {
				return nil, nil
			}
			if err != nil {
				return nil, err
			}
			return []coordination.Holder{h}, nil
		}
	}
	// A lock or semaphore made WithFIFO has its waiters' queue beside the
	// key while any wait: its release wakes the queue's head.
	queued := func() (bool, error) {
		q := slot.KeyIn(full+"\x00fifo", slot.Of(full))
		if q == "" {
			return false, nil
		}
		n, err := coord.Client().Exists(ctx, q).Result()
		return n > 0, err
	}
	switch kind {
	case lockcore.LockLayout.Kind:
		fifo, err := queued()
		if err != nil {
			return forcer{}, err
		}
		m, err := lock.New(coord, key, lock.WithFIFO(fifo))
		if err != nil {
			return forcer{}, err
		}
		return forcer{one(m.Holder), m.ForceRelease}, nil
	case fencingcore.LeaseLayout.Kind:
		// The force release runs on the lease key alone; the counter key
		// is only named (one in the lease key's slot), never touched.
		fence := slot.KeyIn(full+"\x00fence", slot.Of(full))
		if fence == "" {
			return forcer{}, fmt.Errorf("%w: no counter key name lies in the slot of %q", errRefused, full)
		}
		m, err := fencing.New(coord, key, fence[len(full)-len(key):])
		if err != nil {
			return forcer{}, err
		}
		return forcer{one(m.Holder), m.ForceRelease}, nil
	case rwleasecore.LeaseLayout.Kind:
		m, err := rwlease.New(coord, key)
		if err != nil {
			return forcer{}, err
		}
		return forcer{m.Holders, m.ForceRelease}, nil
	default:
		// The capacity passed here is not used: a semaphore's key holds
		// its capacity record.
		fifo, err := queued()
		if err != nil {
			return forcer{}, err
		}
		s, err := semaphore.New(coord, key, 1, semaphore.WithFIFO(fifo))
		if err != nil {
			return forcer{}, err
		}
		return forcer{s.Holders, s.ForceRelease}, nil
	}
}

// runRepairLock force-releases the lease held by the owner whose token
// starts with --owner on a lock (package lock's Mutex, plain or FIFO), a
// fencing lock, a read-write lease or a semaphore, with the library's
// ForceRelease: the holder's own owner-checked release, which wakes
// blocked acquirers at once.
func runRepairLock(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("repair lock", stdout, stderr, `usage: coordctl repair lock --key K --owner TOKEN

Force-releases the lease at K held by the owner whose token starts with TOKEN
(coordctl inspect K shows it), so that the next acquisition succeeds now
instead of when the lease expires: a lock.Mutex's lock (plain or FIFO), a
fencing lock, or one holder's read or write lease of an rwlease or permits of
a semaphore. Use it when the holder hangs or its keep-alive renews forever.
It runs the library's ForceRelease (the holder's own release, owner-checked),
so acquirers blocked in Acquire (another process) are woken at once and take
it within milliseconds; a FIFO lock wakes its queue's head. The holder, if
alive, finds its lease gone at its next renewal or verify (its context is
cancelled). A lease taken meanwhile by someone else is kept. A fencing lock's
counter is kept: the next holder's token is still higher.
Exit status: 0 released; 1 no such key, held by no owner whose token starts
with TOKEN (or by several), or released meanwhile; 2 bad usage; 3 the server
cannot be reached.`, `coordctl repair lock --redis redis://127.0.0.1:6379/0 --key jobs:nightly --owner 3f2a9c1e`)
	key := fs.String("key", "", "lock or lease key (for a fencing lock: its lease key, e.g. {K}:lock); required")
	owner := fs.String("owner", "", "the holder's owner token, or a prefix of it (at least 8 characters); required")
	return oneShot(fs, args, key, 0, func() int {
		if len(*owner) < 8 {
			return fs.usagef("give --owner with at least the first 8 characters of the holder's token (coordctl inspect shows it), got %q", *owner)
		}
		return 0
	}, func(ctx context.Context, coord *coordination.Coordinator) int {
		full := fs.cf.prefix + *key
		r, err := expectKind(ctx, coord.Client(), full, leaseKinds...)
		if err != nil {
			return refusal(stderr, fs.name, err)
		}
		f, err := forcerFor(ctx, coord, r.Kind, *key, full)
		if err != nil {
			return refusal(stderr, fs.name, err)
		}
		hs, err := f.holders(ctx)
		if err != nil {
			return refusal(stderr, fs.name, err)
		}
		var match, all []string
		for _, h := range hs {
			all = append(all, layout.Tok(h.Token))
			if strings.HasPrefix(h.Token, *owner) {
				match = append(match, h.Token)
			}
		}
		switch {
		case len(hs) == 0:
			return refusal(stderr, fs.name, fmt.Errorf("%w: the %s at %q is free", errRefused, r.Kind, full))
		case len(match) == 0:
			return refusal(stderr, fs.name, fmt.Errorf("%w: the %s at %q is held by %s, not by %s...", errRefused, r.Kind, full, strings.Join(all, ", "), *owner))
		case len(match) > 1:
			return refusal(stderr, fs.name, fmt.Errorf("%w: %d holders of the %s at %q have a token starting with %s: give more of it", errRefused, len(match), r.Kind, full, *owner))
		}
		ok, err := f.release(ctx, match[0])
		if err != nil {
			return refusal(stderr, fs.name, err)
		}
		if !ok {
			return refusal(stderr, fs.name, fmt.Errorf("%w: %s no longer held the %s at %q (released or expired meanwhile)", errRefused, layout.Tok(match[0]), r.Kind, full))
		}
		fmt.Fprintf(stdout, "released the %s at %q held by %s\n", r.Kind, full, layout.Tok(match[0]))
		return exitOK
	})
}
