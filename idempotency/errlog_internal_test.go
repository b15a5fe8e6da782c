package idempotency

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

func TestErrorLogOncePerDistinctFailure(t *testing.T) {
	var buf bytes.Buffer
	l := errorLog{logger: slog.New(slog.NewTextHandler(&buf, nil))}
	a, b := errors.New("a"), errors.New("b")
	lines := func() []string { return strings.Split(strings.TrimSpace(buf.String()), "\n") }

	l.warn("msg", "begin", a)
	l.warn("msg", "begin", a)
	l.warn("msg", "begin", a)
	l.warn("msg", "complete", a) // another stage is another failure
	l.warn("msg", "begin", fmt.Errorf("%w: x", errBadRecord))
	if got := lines(); len(got) != 3 {
		t.Fatalf("logged %d lines, want 3:\n%s", len(got), buf.String())
	}
	// A minute later the repeating failure is logged again, with its count.
	for _, e := range l.seen {
		e.at = e.at.Add(-errorLogEvery)
	}
	l.warn("msg", "begin", a)
	if got := lines(); len(got) != 4 || !strings.Contains(got[3], "repeats=2") {
		t.Fatalf("log after a minute:\n%s\nwant a fourth line with repeats=2", buf.String())
	}
	// Past the bound on distinct failures, new ones are still logged.
	for i := range 2 * errorLogDistinct {
		l.warn(fmt.Sprint("msg", i), "begin", b)
	}
	if got := lines(); len(got) != 4+2*errorLogDistinct {
		t.Fatalf("logged %d lines, want %d", len(got), 4+2*errorLogDistinct)
	}
	if len(l.seen) > errorLogDistinct {
		t.Fatalf("%d failures remembered, want at most %d", len(l.seen), errorLogDistinct)
	}
}
