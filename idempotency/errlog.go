package idempotency

import (
	"log/slog"
	"sync"
	"time"

	"github.com/coordkit/coordination/internal/engine"
)

// errorLogEvery is how often one distinct failure is logged again while it
// repeats.
const errorLogEvery = time.Minute

// errorLogDistinct bounds the distinct failures remembered at once.
const errorLogDistinct = 64

// errorLog logs store failures once per distinct failure (message, stage
// and [engine.Describe] of the error) and then at most once per
// errorLogEvery, with the number of repeats in between, so that an outage
// does not log once per request while a new kind of failure is always
// seen. Descriptions never carry keys, tokens, addresses or passwords.
type errorLog struct {
	logger *slog.Logger

	mu   sync.Mutex
	seen map[string]*errorLogEntry
}

type errorLogEntry struct {
	at      time.Time // when it was last logged
	repeats int       // failures not logged since
}

func (l *errorLog) warn(msg, stage string, err error) {
	desc := engine.Describe(err)
	k := msg + "\x00" + stage + "\x00" + desc
	now := time.Now()
	l.mu.Lock()
	e := l.seen[k]
	if e != nil && now.Sub(e.at) < errorLogEvery {
		e.repeats++
		l.mu.Unlock()
		return
	}
	repeats := 0
	if e != nil {
		repeats = e.repeats
		e.at, e.repeats = now, 0
	} else {
		if l.seen == nil {
			l.seen = map[string]*errorLogEntry{}
		}
		if len(l.seen) >= errorLogDistinct {
			for k, old := range l.seen {
				if now.Sub(old.at) >= errorLogEvery {
					delete(l.seen, k)
				}
			}
			if len(l.seen) >= errorLogDistinct {
				clear(l.seen)
			}
		}
		l.seen[k] = &errorLogEntry{at: now}
	}
	l.mu.Unlock()
	args := []any{"stage", stage, "error", desc}
	if repeats > 0 {
		args = append(args, "repeats", repeats)
	}
	l.logger.Warn(msg, args...)
}
