// Command fenced-sql shows fencing where correctness matters, end to end
// with a real database: holders of a Redlock with a fencing node write an
// invoice into SQLite (a pure-Go driver, modernc.org/sqlite) through their
// fencing token, and the database itself refuses a write whose token is
// older than the last one it accepted:
//
//	UPDATE invoice SET body = $body, fence = $token WHERE id = $id AND fence <= $token
//
// The scenario: holder A takes the lock (token 1) and writes, then pauses
// (a GC pause, a frozen VM) past its lock's validity without knowing it;
// holder B takes the lock (token 2) and writes; A wakes up and writes
// late: zero rows change, and B's invoice stays. A lock alone cannot give
// this (A believed it held the lock); the fence at the resource can.
//
// It runs on three embedded Redis servers (miniredis; no setup):
//
//	cd examples/fenced-sql && go run .
//
// This is its own Go module, so that the library's go.mod stays free of
// the SQLite driver. It uses only the public API; README.md beside this
// file shows a session.
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	_ "modernc.org/sqlite"

	coordination "github.com/coordkit/coordination"
	"github.com/coordkit/coordination/redlock"
)

func main() {
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: fenced-sql\n\n"+
			"Runs the paused-holder scenario on three embedded Redis servers and a\n"+
			"SQLite database in a temporary folder; it takes no flags or arguments.")
	}
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "fenced-sql: unexpected argument %q (see -h)\n", flag.Arg(0))
		os.Exit(2)
	}
	if err := run(context.Background(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "fenced-sql:", err)
		os.Exit(1)
	}
}

// ErrStale is returned by [Store.Write] when the database refused a write
// because a holder with a newer fencing token wrote first.
var ErrStale = errors.New("fenced-sql: refused: a newer fencing token wrote first")

// Store keeps invoices in SQLite, each row with the fencing token of its
// last writer.
type Store struct{ db *sql.DB }

// Open opens (creating it if needed) the SQLite database at path.
func Open(path string) (*Store, error) {
	db, err := sql.Open("sqlite", path)
	if err != nil {
		return nil, err
	}
	if _, err := db.Exec(`CREATE TABLE IF NOT EXISTS invoice (
		id    TEXT PRIMARY KEY,
		body  TEXT NOT NULL,
		fence INTEGER NOT NULL
	)`); err != nil {
		db.Close()
		return nil, err
	}
	return &Store{db: db}, nil
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// Create inserts invoice id with fence 0, if it does not exist yet.
func (s *Store) Create(ctx context.Context, id string) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO invoice (id, body, fence) VALUES (?, '', 0) ON CONFLICT (id) DO NOTHING`, id)
	return err
}

// Write stores body for invoice id with the writer's fencing token, in one
// statement that the database checks: the row changes only when token is
// at least the token of the last write. It returns ErrStale when the
// database refused.
func (s *Store) Write(ctx context.Context, id, body string, token int64) error {
	res, err := s.db.ExecContext(ctx,
		`UPDATE invoice SET body = ?, fence = ? WHERE id = ? AND fence <= ?`, body, token, id, token)
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return ErrStale
	}
	return nil
}

// Read returns invoice id's body and the fencing token that wrote it.
func (s *Store) Read(ctx context.Context, id string) (string, int64, error) {
	var body string
	var fence int64
	err := s.db.QueryRowContext(ctx, `SELECT body, fence FROM invoice WHERE id = ?`, id).Scan(&body, &fence)
	return body, fence, err
}

// Outcome is what the scenario observed.
type Outcome struct {
	TokenA, TokenB int64
	LateWrite      error  // A's write after B's: ErrStale
	Body           string // the invoice at the end
	Fence          int64
}

// Scenario runs the paused-holder scenario on group g (with a fencing
// node) and store s; expire makes the nodes' time pass by d (on embedded
// servers; real servers just sleep).
func Scenario(ctx context.Context, g *redlock.Group, s *Store, expire func(d time.Duration), out io.Writer) (Outcome, error) {
	const (
		lockKey = "{invoice:42}" // a {hash tag}: the fencing node's lease and counter share a slot
		id      = "invoice-42"
		ttl     = 2 * time.Second
	)
	var o Outcome
	if err := s.Create(ctx, id); err != nil {
		return o, err
	}
	a, err := g.TryAcquire(ctx, lockKey, ttl)
	if err != nil {
		return o, fmt.Errorf("holder A: %w", err)
	}
	o.TokenA = a.FencingToken()
	if err := s.Write(ctx, id, "total 100 (by A)", o.TokenA); err != nil {
		return o, fmt.Errorf("holder A's first write: %w", err)
	}
	fmt.Fprintf(out, "A holds the lock with fencing token %d and writes\n", o.TokenA)

	fmt.Fprintf(out, "A pauses past its lock's validity (%v) without knowing it\n", a.Validity().Round(time.Millisecond))
	expire(ttl + 100*time.Millisecond)

	b, err := g.TryAcquire(ctx, lockKey, ttl)
	if err != nil {
		return o, fmt.Errorf("holder B: %w", err)
	}
	o.TokenB = b.FencingToken()
	if err := s.Write(ctx, id, "total 120 (by B)", o.TokenB); err != nil {
		return o, fmt.Errorf("holder B's write: %w", err)
	}
	fmt.Fprintf(out, "B holds the lock with fencing token %d and writes\n", o.TokenB)

	o.LateWrite = s.Write(ctx, id, "total 90 (by A, late)", o.TokenA)
	fmt.Fprintf(out, "A wakes up and writes with token %d: %v\n", o.TokenA, o.LateWrite)
	if _, err := b.Release(ctx); err != nil {
		return o, err
	}
	if o.Body, o.Fence, err = s.Read(ctx, id); err != nil {
		return o, err
	}
	fmt.Fprintf(out, "the invoice: %q (fence %d)\n", o.Body, o.Fence)
	return o, nil
}

// run starts three embedded Redis servers, a group over them with node 0
// as the fencing node, a SQLite database in a temporary folder, and runs
// the scenario.
func run(ctx context.Context, out io.Writer) error {
	var (
		coords []*coordination.Coordinator
		minis  []*miniredis.Miniredis
	)
	for range 3 {
		m, err := miniredis.Run()
		if err != nil {
			return err
		}
		defer m.Close()
		rdb := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true})
		defer rdb.Close()
		coord, err := coordination.New(rdb, coordination.WithKeyPrefix("fenced-sql:"))
		if err != nil {
			return err
		}
		defer func() {
			if err := coord.Shutdown(context.Background()); err != nil {
				fmt.Fprintln(os.Stderr, "shutdown:", err)
			}
		}()
		coords = append(coords, coord)
		minis = append(minis, m)
	}
	g, err := redlock.New(coords, redlock.WithFencing(0))
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "fenced-sql-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	s, err := Open(filepath.Join(dir, "invoices.db"))
	if err != nil {
		return err
	}
	defer s.Close()
	expire := func(d time.Duration) {
		for _, m := range minis {
			m.FastForward(d) // the embedded servers' keys expire as if d had passed
		}
	}
	o, err := Scenario(ctx, g, s, expire, out)
	if err != nil {
		return err
	}
	if !errors.Is(o.LateWrite, ErrStale) || o.Fence != o.TokenB {
		return fmt.Errorf("the late write was not refused: %+v", o)
	}
	return nil
}
